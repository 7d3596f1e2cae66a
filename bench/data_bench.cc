// data_bench: how fast the data layer reads and parses on ONE core, printed
// beside the machine's limit (single-thread memcpy bandwidth) and the goals:
//
//   read  >= 1 GB/s of record bytes delivered from uncompressed files;
//   parse >= 1 M small tf.Examples per second per core.
//
// One thread throughout (LibTorch included). Record files are written to a
// temporary directory and read back while their pages are in the page cache,
// so read figures are WARM: no disk I/O, only the copy out of the page cache
// and the library's own work. Every figure is the best of --reps timed runs
// after one untimed warm-up run; the median is printed beside it, and cpu%
// (thread CPU time / wall time of the best run) shows whether that run was
// descheduled by other load on the machine. Units: 1 MB = 1e6 bytes, 1 GB =
// 1e9 bytes.
//
//   data_bench [--reps=N] [--only=memcpy|read|parse|parts] [--case=TEXT] [--mnist=DIR]
//
// --only runs one section and --case only the read or parse rows whose name
// contains TEXT (for profiling one figure with perf or callgrind); the memcpy
// limit is always measured. "parts" times the pieces the figures are
// made of (pread, CRCs, snappy, torch allocation, ...), which is how the
// analysis in docs/benchmark-notes.md says what bounds each figure.
#include <snappy.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/compression.h"
#include "common/crc.h"
#include "common/file.h"
#include "common/strings.h"
#include "data/example_wire.h"
#include "data/mnist_import.h"
#include "elasticdl/data/dataset.h"
#include "elasticdl/data/example.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/proto/example.pb.h"

namespace elasticdl::bench {
namespace {

constexpr double kMB = 1e6;
constexpr double kGB = 1e9;
constexpr double kReadGoalBytesPerSec = 1e9;  // read >= 1 GB/s uncompressed
constexpr double kSmallParseGoal = 1e6;       // >= 1 M small examples/s/core
constexpr size_t kPixels = 28 * 28;

// Keeps `v` (and what it points to) alive so the optimizer cannot drop the
// work that produced it.
template <typename T>
void KeepAlive(const T& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}

void Check(const Status& s, std::string_view what) {
  if (s.ok()) return;
  fmt::print(stderr, "data_bench: {}: {}\n", what,
             std::string_view(s.message().data(), s.message().size()));
  std::exit(1);
}

template <typename T>
T Value(StatusOr<T> v, std::string_view what) {
  Check(v.status(), what);
  return std::move(v).value();
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wall-clock seconds of the best and the median of `reps` runs (after one
// untimed warm-up), and the CPU share of the best run.
struct Timing {
  double best_s = 0;
  double median_s = 0;
  double cpu_share = 0;
};

Timing Measure(int reps, const std::function<void()>& fn) {
  // Warm-up: page cache, allocator, branch predictors.
  fn();
  std::vector<std::pair<double, double>> runs;  // (wall, cpu)
  for (int i = 0; i < reps; ++i) {
    const double cpu0 = ThreadCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    const double cpu1 = ThreadCpuSeconds();
    runs.emplace_back(std::chrono::duration<double>(t1 - t0).count(), cpu1 - cpu0);
  }
  std::sort(runs.begin(), runs.end());
  Timing t;
  t.best_s = runs.front().first;
  t.median_s = runs[runs.size() / 2].first;
  t.cpu_share = runs.front().second / runs.front().first;
  return t;
}

// ---------------------------------------------------------------- the table

struct Row {
  std::string name;
  std::string unit;  // of the figure: "GB/s", "MB/s" or "rec/s"
  double scale = 1;  // figure = work / seconds / scale
  double work = 0;   // bytes or records per run
  double bytes = 0;  // record bytes per run (for the ratio to memcpy)
  Timing t;
  double goal = 0;  // in `unit`; 0 means the row has no goal
  std::string goal_text;
  std::string note;
};

double PerSecond(const Row& r, double seconds) { return r.work / seconds / r.scale; }

void PrintHeader() {
  fmt::print("{:<56} {:>12} {:>9} {:>5} {:>8} {:>22} {:>7}  {}\n", "figure", "best", "median",
             "cpu%", "/memcpy", "goal", "/goal", "verdict; notes");
}

void PrintRow(const Row& r, double memcpy_bytes_per_s) {
  const double best = PerSecond(r, r.t.best_s);
  const double median = PerSecond(r, r.t.median_s);
  auto format = [&](double v) {
    return r.unit == "GB/s" ? fmt::format("{:.2f}", v) : fmt::format("{:.0f}", v);
  };
  const std::string value = format(best);
  const double vs_memcpy = r.bytes / r.t.best_s / memcpy_bytes_per_s;
  std::string goal = "-", ratio = "-", verdict = "info";
  if (r.goal > 0) {
    goal = r.goal_text;
    ratio = fmt::format("{:.2f}", best / r.goal);
    verdict = best >= r.goal ? "goal met" : "goal NOT met";
  } else if (!r.goal_text.empty()) {
    goal = r.goal_text;
  }
  fmt::print("{:<56} {:>7} {:<4} {:>9} {:>5.0f} {:>8.3f} {:>22} {:>7}  {}{}{}\n", r.name, value,
             r.unit == "rec/s" ? "r/s" : r.unit, format(median), 100 * r.t.cpu_share, vs_memcpy,
             goal, ratio, verdict, r.note.empty() ? "" : "; ", r.note);
}

// ------------------------------------------------------------------ records

// A corpus of serialized records, plus where the bytes came from.
struct Corpus {
  std::vector<std::string> records;
  double bytes = 0;
  std::string source;
};

void Add(Corpus* c, std::string record) {
  c->bytes += static_cast<double>(record.size());
  c->records.push_back(std::move(record));
}

// Pixels and labels of the Fashion-MNIST training and test splits.
struct Images {
  std::string pixels;  // n * 784 bytes
  std::string labels;  // n bytes
};

// Reads one gzipped IDX file (header of `header` bytes) and appends its data.
bool AppendIdx(const std::string& path, size_t header, std::string* out) {
  StatusOr<std::string> gz = ReadFileToString(path);
  if (!gz.ok()) return false;
  std::string raw;
  if (!compression::GzipUncompress(*gz, size_t{1} << 31, &raw).ok() || raw.size() < header) {
    return false;
  }
  out->append(raw, header, std::string::npos);
  return true;
}

// Fashion-MNIST tf.Examples, built with MnistExample from the real images
// when `dir` holds them, else from deterministic synthetic pixels with
// MNIST's character (about half the pixels 0).
Corpus MnistCorpus(const std::string& dir, size_t want) {
  Images im;
  std::string source;
  bool real = true;
  for (const char* split : {"train", "t10k"}) {
    real = real &&
           AppendIdx(fmt::format("{}/{}-images-idx3-ubyte.gz", dir, split), 16, &im.pixels) &&
           AppendIdx(fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, split), 8, &im.labels);
  }
  size_t n = im.labels.size();
  if (real && n > 0 && im.pixels.size() == n * kPixels) {
    source = fmt::format("Fashion-MNIST images from {}", dir);
  } else {
    n = 70000;
    im.pixels.assign(n * kPixels, '\0');
    im.labels.assign(n, '\0');
    uint64_t x = 88172645463325252ull;  // xorshift64
    for (size_t i = 0; i < n * kPixels; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      im.pixels[i] = static_cast<char>((x & 1) ? 0 : (x >> 8) & 0xff);
    }
    for (size_t i = 0; i < n; ++i) im.labels[i] = static_cast<char>(i % 10);
    source = "synthetic pixels (Fashion-MNIST not found in " + dir + ")";
  }
  Corpus c;
  c.source = source;
  const auto* px = reinterpret_cast<const uint8_t*>(im.pixels.data());
  for (size_t i = 0; i < want; ++i) {
    const size_t k = i % n;  // wraps only if more records than images are asked for
    Add(&c, MnistExample(px + k * kPixels, static_cast<uint8_t>(im.labels[k])));
  }
  return c;
}

// A small tf.Example: three int64 and two float features, one value each.
std::string SmallExample(const std::array<std::string, 5>& keys, uint64_t i) {
  proto::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f[keys[0]].mutable_int64_list()->add_value(static_cast<int64_t>(i));
  f[keys[1]].mutable_int64_list()->add_value(static_cast<int64_t>(i % 1000));
  f[keys[2]].mutable_int64_list()->add_value(static_cast<int64_t>(i % 7));
  f[keys[3]].mutable_float_list()->add_value(static_cast<float>(i % 100) * 0.01f);
  f[keys[4]].mutable_float_list()->add_value(0.5f);
  return e.SerializeAsString();
}

// ~100-byte records (realistic feature names) for the per-record read cost.
Corpus SmallRecordCorpus(size_t n) {
  const std::array<std::string, 5> keys = {"user_id", "item_id", "clicks", "score", "ctr"};
  Corpus c;
  c.source = "small tf.Examples";
  for (size_t i = 0; i < n; ++i)
    Add(&c, SmallExample(keys, 1000000007ull * (i + 1) % (1ull << 40)));
  return c;
}

// ~70-byte examples (one-letter names) for the small-example parse rate.
Corpus TinyExampleCorpus(size_t n) {
  const std::array<std::string, 5> keys = {"a", "b", "c", "x", "y"};
  Corpus c;
  for (size_t i = 0; i < n; ++i) Add(&c, SmallExample(keys, i % 100));
  return c;
}

// ------------------------------------------------------------------ memcpy

// Best single-thread memcpy bandwidth over 256 MiB buffers (bytes copied per
// second; the read and the write are not counted twice).
Row MemcpyRow(int reps) {
  const size_t n = size_t{256} << 20;
  std::vector<char> src(n, 1), dst(n, 0);  // touched: no page faults in the timing
  Row r;
  r.name = "memcpy 256 MiB -> 256 MiB (the limit)";
  r.unit = "GB/s";
  r.scale = kGB;
  r.work = r.bytes = static_cast<double>(n);
  r.t = Measure(std::max(reps, 5), [&] {
    std::memcpy(dst.data(), src.data(), n);
    KeepAlive(dst.data());
  });
  return r;
}

// ------------------------------------------------------------------- reads

std::string WriteFile(const std::string& path, RecordFormat format, Compressor compressor,
                      const Corpus& c, size_t n) {
  RecordWriterOptions o;
  o.format = format;
  o.compressor = compressor;
  auto w = Value(RecordWriter::Create(path, o), path);
  for (size_t i = 0; i < n; ++i) Check(w->Write(c.records[i]), path);
  Check(w->Close(), path);
  return path;
}

// Scan(0, n) of a whole open file, summing the record sizes.
double ScanFile(const RecordFile& file, uint64_t want_records) {
  auto scan = Value(file.Scan(0, file.num_records()), file.path());
  uint64_t n = 0, bytes = 0;
  while (scan->Next()) {
    bytes += scan->record().size();
    ++n;
  }
  Check(scan->status(), file.path());
  if (n != want_records) Check(absl::DataLossError("record count differs"), file.path());
  return static_cast<double>(bytes);
}

// Open + Scan(0, n), as a worker does for a task on a file it has not open.
double OpenAndScan(const std::string& path, uint64_t want_records) {
  return ScanFile(*Value(RecordFile::Open(path), path), want_records);
}

double OpenMillis(const std::string& path, int reps) {
  Timing t = Measure(reps, [&] { KeepAlive(Value(RecordFile::Open(path), path)->num_records()); });
  return t.best_s * 1e3;
}

Row ReadRow(const std::string& name, const std::string& path, const Corpus& c, size_t n,
            bool has_goal, int reps) {
  double bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += static_cast<double>(c.records[i].size());
  Row r;
  r.name = name;
  r.unit = "MB/s";
  r.scale = kMB;
  r.work = r.bytes = bytes;
  r.t = Measure(reps, [&] { KeepAlive(OpenAndScan(path, n)); });
  // Scanning again a file that stays open (the file may keep buffers).
  const auto open = Value(RecordFile::Open(path), path);
  const Timing rescan = Measure(reps, [&] { KeepAlive(ScanFile(*open, n)); });
  if (has_goal) {
    r.goal = kReadGoalBytesPerSec / kMB;
    r.goal_text = ">= 1000 MB/s";
  } else {
    r.goal_text = "(info)";
  }
  const double file_mb = static_cast<double>(std::filesystem::file_size(path)) / kMB;
  r.note = fmt::format(
      "{:.0f} MB file; {:.1f} M rec/s; open {:.1f} ms; rescan of the open file {:.0f} MB/s",
      file_mb, static_cast<double>(n) / r.t.best_s / 1e6, OpenMillis(path, reps),
      bytes / rescan.best_s / kMB);
  return r;
}

void ReadSection(const std::string& dir, const Corpus& mnist, const Corpus& small, int reps,
                 double memcpy_bps, const std::string& only_case) {
  const size_t nm = mnist.records.size();
  const size_t ng = std::min<size_t>(nm, 10000);  // gzip writes slowly; a subset
  const size_t ns = small.records.size();
  const std::string m = fmt::format("MNIST {:.1f} KB x {}", mnist.bytes / nm / 1e3, nm);
  const std::string g = fmt::format("MNIST {:.1f} KB x {}", mnist.bytes / nm / 1e3, ng);
  const std::string s = fmt::format("small {:.0f} B x {}", small.bytes / ns, ns);
  using RF = RecordFormat;
  using C = Compressor;
  struct Case {
    std::string name, file;
    RF format;
    C comp;
    const Corpus* c;
    size_t n;
    bool goal;
  };
  const std::vector<Case> cases = {
      {"RecordIO none,   " + m, "mnist_none.recordio", RF::kRecordIO, C::kNone, &mnist, nm, true},
      {"RecordIO snappy, " + m, "mnist_snappy.recordio", RF::kRecordIO, C::kSnappy, &mnist, nm,
       false},
      {"RecordIO gzip,   " + g, "mnist_gzip.recordio", RF::kRecordIO, C::kGzip, &mnist, ng, false},
      {"TFRecord,        " + m, "mnist.tfrecord", RF::kTFRecord, C::kNone, &mnist, nm, true},
      {"RecordIO none,   " + s, "small_none.recordio", RF::kRecordIO, C::kNone, &small, ns, true},
      {"RecordIO snappy, " + s, "small_snappy.recordio", RF::kRecordIO, C::kSnappy, &small, ns,
       false},
      {"TFRecord,        " + s, "small.tfrecord", RF::kTFRecord, C::kNone, &small, ns, true},
  };
  fmt::print(
      "\n(b, c) Record reads: RecordFile::Open + Scan(0, n) of every record, page cache "
      "warm, 1 thread\n");
  PrintHeader();
  for (const Case& k : cases) {
    if (k.name.find(only_case) == std::string::npos) continue;
    const std::string path = dir + "/" + k.file;
    WriteFile(path, k.format, k.comp, *k.c, k.n);
    PrintRow(ReadRow(k.name, path, *k.c, k.n, k.goal, reps), memcpy_bps);
    std::filesystem::remove(path);
  }
}

// ------------------------------------------------------------------ parsing

std::vector<std::string_view> Views(const Corpus& c) {
  return std::vector<std::string_view>(c.records.begin(), c.records.end());
}

Row ParseRow(const std::string& name, const Corpus& c, int reps, double goal,
             const std::string& goal_text, const std::function<void()>& run_all) {
  Row r;
  r.name = name;
  r.unit = "rec/s";
  r.work = static_cast<double>(c.records.size());
  r.bytes = c.bytes;
  r.goal = goal;
  r.goal_text = goal_text;
  r.t = Measure(reps, run_all);
  r.note = fmt::format("{:.0f} ns/rec", r.t.best_s / r.work * 1e9);
  return r;
}

// Wire level: FindFeatures + AppendFloats/AppendInt64s, no LibTorch.
std::function<void()> WireParse(const std::vector<std::string_view>& recs,
                                std::vector<std::string_view> float_keys,
                                std::vector<std::string_view> int_keys) {
  return [&recs, float_keys, int_keys] {
    std::vector<std::string_view> keys = float_keys;
    keys.insert(keys.end(), int_keys.begin(), int_keys.end());
    std::vector<example::FeatureView> views;
    std::vector<float> floats;
    std::vector<int64_t> ints;
    uint64_t sink = 0;
    for (std::string_view rec : recs) {
      Check(example::FindFeatures(rec, keys, &views), "FindFeatures");
      floats.clear();
      ints.clear();
      size_t i = 0;
      for (; i < float_keys.size(); ++i) Check(example::AppendFloats(views[i], &floats), "floats");
      for (; i < keys.size(); ++i) Check(example::AppendInt64s(views[i], &ints), "int64s");
      sink += floats.size() + static_cast<uint64_t>(ints[0]);
    }
    KeepAlive(sink);
  };
}

std::function<void()> TensorParse(const std::vector<std::string_view>& recs,
                                  const FeatureSpecMap& spec) {
  return [&recs, &spec] {
    int64_t sink = 0;
    for (std::string_view rec : recs) {
      Features f = Value(ParseExample(rec, spec), "ParseExample");
      sink += f.tensors.begin()->second.numel();
    }
    KeepAlive(sink);
  };
}

std::function<void()> BatchParse(const std::vector<std::string_view>& recs,
                                 const FeatureSpecMap& spec, size_t batch) {
  return [&recs, &spec, batch] {
    int64_t sink = 0;
    std::vector<std::string_view> b;
    for (size_t i = 0; i < recs.size(); i += batch) {
      b.assign(recs.begin() + static_cast<std::ptrdiff_t>(i),
               recs.begin() + static_cast<std::ptrdiff_t>(std::min(recs.size(), i + batch)));
      Features f = Value(ParseExampleBatch(b, spec), "ParseExampleBatch");
      sink += f.tensors.begin()->second.size(0);
    }
    KeepAlive(sink);
  };
}

// What a Dataset .map(ParseExample).batch(64) pipeline does per batch:
// records parsed one by one, then stacked by Collate<FeatureMap>.
std::function<void()> ParseThenCollate(const std::vector<std::string_view>& recs,
                                       const FeatureSpecMap& spec, size_t batch) {
  return [&recs, &spec, batch] {
    int64_t sink = 0;
    std::vector<FeatureMap> items;
    for (size_t i = 0; i < recs.size(); i += batch) {
      items.clear();
      for (size_t k = i; k < std::min(recs.size(), i + batch); ++k) {
        items.push_back(Value(ParseExample(recs[k], spec), "ParseExample").tensors);
      }
      FeatureMap b = Value(Collate<FeatureMap>::Apply(items), "Collate");
      sink += b.begin()->second.size(0);
    }
    KeepAlive(sink);
  };
}

// The parsers must agree with what was written before their speed counts.
void CheckParsers(const Corpus& mnist, const FeatureSpecMap& spec) {
  Features f = Value(ParseExample(mnist.records[0], spec), "ParseExample");
  std::vector<example::DecodedFeature> all;
  Check(example::DecodeAll(mnist.records[0], &all), "DecodeAll");
  const torch::Tensor image = f["image"].reshape(-1);
  bool same = all.size() == 2 && all[0].key == "image" && all[0].floats.size() == kPixels &&
              std::memcmp(image.data_ptr<float>(), all[0].floats.data(), kPixels * 4) == 0 &&
              f["label"].item<int64_t>() == all[1].int64s.at(0);
  if (!same) Check(absl::InternalError("parsers disagree on record 0"), "check");
  // The batch parser must give the rows the one-by-one parser gives.
  std::vector<std::string_view> batch(mnist.records.begin(), mnist.records.begin() + 64);
  Features b = Value(ParseExampleBatch(batch, spec), "ParseExampleBatch");
  for (size_t r = 0; r < batch.size(); ++r) {
    Features one = Value(ParseExample(batch[r], spec), "ParseExample");
    for (const auto& [name, t] : one.tensors) {
      if (!torch::equal(b[name][static_cast<int64_t>(r)], t)) {
        Check(absl::InternalError("ParseExampleBatch disagrees with ParseExample"), name);
      }
    }
  }
}

void ParseSection(const Corpus& mnist, const Corpus& tiny, int reps, double memcpy_bps,
                  const std::string& only_case) {
  const FeatureSpecMap mnist_spec = {
      {"image", FixedLenFeature({28, 28}, torch::kFloat32)},
      {"label", FixedLenFeature({1}, torch::kInt64)},
  };
  FeatureSpecMap tiny_spec;
  for (const char* k : {"a", "b", "c"}) tiny_spec[k] = FixedLenFeature({1}, torch::kInt64);
  for (const char* k : {"x", "y"}) tiny_spec[k] = FixedLenFeature({1}, torch::kFloat32);
  CheckParsers(mnist, mnist_spec);

  const auto m = Views(mnist);
  const auto t = Views(tiny);
  const double rec_bytes = mnist.bytes / static_cast<double>(mnist.records.size());
  const double mnist_goal = kReadGoalBytesPerSec / rec_bytes;  // keep up with a 1 GB/s read
  const std::string mnist_goal_text = fmt::format(">= {:.0f}k (=1 GB/s)", mnist_goal / 1e3);
  const std::string mn = fmt::format("MNIST {:.1f} KB", rec_bytes / 1e3);
  const std::string tn = fmt::format("small {:.0f} B", tiny.bytes / tiny.records.size());

  fmt::print(
      "\n(d) tf.Example parsing, 1 thread (torch::set_num_threads(1)); {} distinct MNIST "
      "and {} distinct small records per run\n",
      m.size(), t.size());
  PrintHeader();
  struct Case {
    std::string name;
    const Corpus* corpus;
    double goal;
    std::string goal_text;
    std::function<void()> run_all;
  };
  const std::string small_goal = ">= 1000000";
  const std::vector<Case> cases = {
      {"wire FindFeatures+Append*, " + mn, &mnist, mnist_goal, mnist_goal_text,
       WireParse(m, {"image"}, {"label"})},
      {"ParseExample (one by one), " + mn, &mnist, mnist_goal, mnist_goal_text,
       TensorParse(m, mnist_spec)},
      {"ParseExampleBatch x64, " + mn, &mnist, mnist_goal, mnist_goal_text,
       BatchParse(m, mnist_spec, 64)},
      {"ParseExample + Collate x64 (map->batch), " + mn, &mnist, mnist_goal, mnist_goal_text,
       ParseThenCollate(m, mnist_spec, 64)},
      {"wire FindFeatures+Append*, " + tn + " (3 i64, 2 f32)", &tiny, kSmallParseGoal, small_goal,
       WireParse(t, {"x", "y"}, {"a", "b", "c"})},
      {"ParseExample (one by one), " + tn, &tiny, kSmallParseGoal, small_goal,
       TensorParse(t, tiny_spec)},
      {"ParseExampleBatch x64, " + tn, &tiny, kSmallParseGoal, small_goal,
       BatchParse(t, tiny_spec, 64)},
      {"ParseExample + Collate x64 (map->batch), " + tn, &tiny, kSmallParseGoal, small_goal,
       ParseThenCollate(t, tiny_spec, 64)},
  };
  for (const Case& k : cases) {
    if (k.name.find(only_case) == std::string::npos) continue;
    PrintRow(ParseRow(k.name, *k.corpus, reps, k.goal, k.goal_text, k.run_all), memcpy_bps);
  }
}

// -------------------------------------------------------------------- parts

// Times `fn` (which does `ops` operations on `bytes` bytes) and prints GB/s
// and ns per operation.
void Part(const std::string& name, double bytes, double ops, int reps,
          const std::function<void()>& fn) {
  Timing t = Measure(reps, fn);
  const std::string gbps = bytes > 0 ? fmt::format("{:.2f}", bytes / t.best_s / kGB) : "-";
  fmt::print("  {:<70} {:>6} GB/s {:>10.1f} ns/op  (cpu {:.0f}%)\n", name, gbps,
             t.best_s / ops * 1e9, 100 * t.cpu_share);
}

// Length-prefixed records, as a RecordIO chunk's raw payload, up to `limit`.
std::string RawPayload(const Corpus& c, size_t limit) {
  std::string raw;
  for (const std::string& r : c.records) {
    if (raw.size() + 4 + r.size() > limit) break;
    uint32_t len = static_cast<uint32_t>(r.size());
    raw.append(reinterpret_cast<const char*>(&len), 4);
    raw += r;
  }
  return raw;
}

void PartsSection(const std::string& dir, const Corpus& mnist, int reps) {
  fmt::print("\nParts (what the figures above are made of), 1 thread, best of {}\n", reps);
  const size_t chunk = size_t{32} << 20;  // the writer's default chunk
  const std::string raw = RawPayload(mnist, chunk);
  const double rb = static_cast<double>(raw.size());

  const std::string path = WriteFile(dir + "/parts.recordio", RecordFormat::kRecordIO,
                                     Compressor::kNone, mnist, mnist.records.size());
  {
    auto file = Value(RandomAccessFile::Open(path), path);
    const double fb = static_cast<double>(file->size());
    std::string buf(chunk, '\0');
    Part("pread of the page-cached file, 32 MiB at a time (RecordIO chunk)", fb, fb / chunk, reps,
         [&] {
           for (uint64_t off = 0; off < file->size(); off += chunk) {
             size_t got;
             Check(file->Read(off, chunk, buf.data(), &got), "pread");
           }
         });
    std::string small_buf(1 << 20, '\0');
    Part("pread of the page-cached file, 1 MiB at a time (TFRecord buffer)", fb, fb / (1 << 20),
         reps, [&] {
           for (uint64_t off = 0; off < file->size(); off += small_buf.size()) {
             size_t got;
             Check(file->Read(off, small_buf.size(), small_buf.data(), &got), "pread");
           }
         });
    Part("fresh 32 MiB buffer: mmap + zero-fill by first touch + munmap", rb, 1, reps, [&] {
      // What the chunk buffer of each new RecordIO scanner costs: glibc serves
      // a 32 MiB std::string by mmap, and resize() zero-fills it.
      void* p =
          mmap(nullptr, raw.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) Check(absl::InternalError("mmap failed"), "mmap");
      std::memset(p, 0, raw.size());
      KeepAlive(p);
      munmap(p, raw.size());
    });
  }
  std::filesystem::remove(path);

  Part("CRC-32 (ISA-L) of a 32 MiB chunk (= L3 size; RecordIO chunk check)", rb, 1, reps,
       [&] { KeepAlive(crc::Crc32Ieee(raw)); });
  const std::string_view l2(raw.data(), 256 << 10);
  Part("CRC-32 (ISA-L) of 256 KiB in cache", 256 << 10, 1, reps * 20,
       [&] { KeepAlive(crc::Crc32Ieee(l2)); });
  const std::string& rec = mnist.records[0];
  Part("CRC-32C of one 3.2 KB record (TFRecord data check)", 1000.0 * rec.size(), 1000, reps, [&] {
    for (int i = 0; i < 1000; ++i) KeepAlive(crc::Crc32c(rec));
  });
  const std::string_view hdr(rec.data(), 8);
  Part("CRC-32C of 8 bytes (TFRecord length check)", 8000, 1000, reps, [&] {
    for (int i = 0; i < 1000; ++i) KeepAlive(crc::Crc32c(hdr));
  });

  std::string framed;
  compression::SnappyFramedCompress(raw, &framed);
  std::string out;
  Part(fmt::format("snappy framed uncompress of a 32 MiB chunk (ratio {:.2f}), out bytes",
                   rb / static_cast<double>(framed.size())),
       rb, 1, reps, [&] {
         out.clear();
         Check(compression::SnappyFramedUncompress(framed, size_t{1} << 30, &out), "snappy");
       });
  std::string block;
  const std::string_view piece(raw.data(), 65536);
  std::string compressed;
  snappy::Compress(piece.data(), piece.size(), &compressed);
  Part("  of which snappy::RawUncompress of one 64 KiB block", 65536, 1, reps * 20, [&] {
    block.resize(65536);
    snappy::RawUncompress(compressed.data(), compressed.size(), block.data());
    KeepAlive(block.data());
  });
  Part("  of which CRC-32C of one 64 KiB block", 65536, 1, reps * 20,
       [&] { KeepAlive(crc::Crc32c(piece)); });
  std::string gz;
  const std::string_view gz_in(raw.data(), std::min<size_t>(raw.size(), 8 << 20));
  Check(compression::GzipCompress(gz_in, &gz), "gzip");
  Part("gzip (zlib inflate) of 8 MiB, out bytes, via a 64 KiB buffer", gz_in.size(), 1, reps, [&] {
    out.clear();
    Check(compression::GzipUncompress(gz, size_t{1} << 30, &out), "gunzip");
  });

  const std::string long_path = dir + "/train/data-00000-of-00006.tfrecord";
  Part("StrCat(path, \": record \", i, \" at offset \", off) (TFRecord, per record)", 0, 10000,
       reps, [&] {
         for (uint64_t i = 0; i < 10000; ++i) {
           KeepAlive(StrCat(long_path, ": record ", i, " at offset ", i * 3222).size());
         }
       });
  Part("torch::empty({28, 28}, kFloat32)", 0, 10000, reps, [&] {
    for (int i = 0; i < 10000; ++i) KeepAlive(torch::empty({28, 28}, torch::kFloat32).numel());
  });
  const torch::Tensor batch = torch::empty({64, 28, 28}, torch::kFloat32);
  Part("batch[r] (a row view, as ParseExampleBatch takes per record)", 0, 10000, reps, [&] {
    for (int i = 0; i < 10000; ++i) KeepAlive(batch[i % 64].data_ptr());
  });
  std::vector<float> floats;
  Part("std::vector<float>::resize(784) + memcpy 3136 B (AppendFloats)", 3136.0 * 10000, 10000,
       reps, [&] {
         for (int i = 0; i < 10000; ++i) {
           floats.clear();
           floats.resize(784);
           std::memcpy(floats.data(), rec.data() + 20, 3136);
           KeepAlive(floats.data());
         }
       });
}

// ---------------------------------------------------------------------- main

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Flags {
  int reps = 5;
  std::string only;
  std::string mnist_dir = "/usr/share/datasets/fashion-mnist";
  std::string only_case;  // read section: only the cases whose name contains this
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.rfind("--reps=", 0) == 0) {
      f.reps = std::max(1, std::atoi(argv[i] + 7));
    } else if (a.rfind("--only=", 0) == 0) {
      f.only = std::string(a.substr(7));
    } else if (a.rfind("--case=", 0) == 0) {
      f.only_case = std::string(a.substr(7));
    } else if (a.rfind("--mnist=", 0) == 0) {
      f.mnist_dir = std::string(a.substr(8));
    } else {
      fmt::print(stderr,
                 "usage: data_bench [--reps=N] [--only=memcpy|read|parse|parts] [--case=TEXT] "
                 "[--mnist=DIR]\n");
      std::exit(2);
    }
  }
  return f;
}

// A temporary directory, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/edl_data_bench.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      Check(absl::InternalError("mkdtemp failed for " + tmpl), "temp dir");
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  torch::set_num_threads(1);
  const auto start = std::chrono::steady_clock::now();
  auto wants = [&](std::string_view s) { return flags.only.empty() || flags.only == s; };

  fmt::print("data_bench: {} ({} hardware threads), load average {} at start\n", CpuModel(),
             std::thread::hardware_concurrency(), LoadAverage());
  fmt::print(
      "1 thread; wall time by std::chrono::steady_clock; figure = BEST of {} runs after "
      "1 warm-up run (median beside it); cpu% = thread CPU / wall of the best run; "
      "1 MB = 1e6 B\n",
      flags.reps);
  fmt::print("/memcpy = record bytes per second / memcpy bytes per second\n");

  const Row memcpy_row = MemcpyRow(flags.reps);
  const double memcpy_bps = memcpy_row.bytes / memcpy_row.t.best_s;
  fmt::print("\n(a) Limit\n");
  PrintHeader();
  PrintRow(memcpy_row, memcpy_bps);

  TempDir dir;
  if (wants("read") || wants("parse") || wants("parts")) {
    const size_t n_mnist = wants("read") || wants("parts") ? 70000 : 20000;
    Corpus mnist = MnistCorpus(flags.mnist_dir, n_mnist);
    fmt::print("\nrecords: {} ({} records, {:.0f} MB, {:.0f} B mean); files in {} (page cache)\n",
               mnist.source, mnist.records.size(), mnist.bytes / kMB,
               mnist.bytes / static_cast<double>(mnist.records.size()), dir.path());
    if (wants("read")) {
      const Corpus small = SmallRecordCorpus(1000000);
      ReadSection(dir.path(), mnist, small, flags.reps, memcpy_bps, flags.only_case);
    }
    if (wants("parse")) {
      mnist.records.resize(std::min<size_t>(mnist.records.size(), 20000));
      mnist.bytes = 0;
      for (const auto& r : mnist.records) mnist.bytes += static_cast<double>(r.size());
      ParseSection(mnist, TinyExampleCorpus(200000), flags.reps, memcpy_bps, flags.only_case);
    }
    if (wants("parts")) PartsSection(dir.path(), mnist, flags.reps);
  }
  fmt::print("\ntotal {:.1f} s; load average {} at end\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
             LoadAverage());
  return 0;
}

}  // namespace
}  // namespace elasticdl::bench

int main(int argc, char** argv) { return elasticdl::bench::Main(argc, argv); }
