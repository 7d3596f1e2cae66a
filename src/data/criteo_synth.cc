#include "data/criteo_synth.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/file.h"
#include "common/strings.h"
#include "common/zipf.h"
#include "elasticdl/seed.h"

namespace elasticdl {
namespace {

constexpr int kLatentDim = 8;
// Half-widths of the uniform hidden parameters. The per-value weights are
// uniform in [-1, 1]; with these, those weights, the pairs and the integers
// make up roughly 50%, 40% and 10% of the raw score's variance.
constexpr double kLatentRange = 0.4;
constexpr double kIntegerWeightRange = 0.5;
// Lines drawn to fit the calibration.
constexpr uint64_t kPilotRecords = 20000;
// Draw streams: every line is a function of (seed, stream, index).
constexpr uint64_t kPilotStream = 0;
constexpr uint64_t kTrainStream = 1;
constexpr uint64_t kTestStream = 2;

// Per categorical field: vocabulary at scale 1 (the Kaggle data's cardinality,
// the largest cut down) and how often the field is empty.
struct CategoricalSpec {
  uint64_t vocabulary;
  double missing;
};
constexpr std::array<CategoricalSpec, kCriteoCategoricalFeatures> kCategorical = {{
    {1460, 0},       // C1
    {583, 0},        // C2
    {120000, 0.03},  // C3
    {60000, 0.03},   // C4
    {305, 0},        // C5
    {24, 0.12},      // C6
    {12517, 0},      // C7
    {633, 0},        // C8
    {3, 0},          // C9
    {30000, 0},      // C10
    {5683, 0},       // C11
    {100000, 0.03},  // C12
    {3194, 0},       // C13
    {27, 0},         // C14
    {14992, 0},      // C15
    {80000, 0.03},   // C16
    {10, 0},         // C17
    {5652, 0},       // C18
    {2173, 0.44},    // C19
    {4, 0.44},       // C20
    {90000, 0.03},   // C21
    {18, 0.76},      // C22
    {15, 0},         // C23
    {40000, 0.03},   // C24
    {105, 0.44},     // C25
    {30000, 0.44},   // C26
}};

// Per integer field: how often it is empty, the Lomax scale (the median is
// about 0.59 times it) and how often it is negative.
struct IntegerSpec {
  double missing;
  double scale;
  double negative;
};
constexpr double kLomaxShape = 1.5;
constexpr double kIntegerMax = 1e9;
constexpr std::array<IntegerSpec, kCriteoIntegerFeatures> kInteger = {{
    {0.45, 2, 0},      // I1
    {0, 8, 0.02},      // I2
    {0.21, 14, 0},     // I3
    {0.22, 8, 0},      // I4
    {0.026, 5000, 0},  // I5
    {0.22, 60, 0},     // I6
    {0.04, 6, 0},      // I7
    {0.0005, 15, 0},   // I8
    {0.04, 70, 0},     // I9
    {0.45, 1, 0},      // I10
    {0.04, 3, 0},      // I11
    {0.76, 0.6, 0},    // I12
    {0.22, 8, 0},      // I13
}};

// One line's features before its label. A rank of -1 is a missing value.
struct Features {
  std::array<int64_t, kCriteoCategoricalFeatures> ranks;
  std::array<std::optional<int64_t>, kCriteoIntegerFeatures> integers;
};

// Uniform in [-range, range] from 16 bits.
double Symmetric16(uint64_t bits, double range) {
  return (static_cast<double>(bits & 0xffff) / 32767.5 - 1) * range;
}

// The hidden model and the feature distributions, all functions of the seed.
class Generator {
 public:
  explicit Generator(const CriteoSynthOptions& options)
      : seed_(options.seed), vocabulary_(CriteoSynthVocabulary(options.vocabulary_scale)) {
    for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
      zipf_.emplace_back(vocabulary_[f], options.zipf);
      field_key_[f] = SeedMix(seed_, {3, static_cast<uint64_t>(f)});
    }
    for (int k = 0; k < kCriteoIntegerFeatures; ++k) {
      integer_weight_[k] =
          Symmetric16(SeedMix(seed_, {4, static_cast<uint64_t>(k)}), kIntegerWeightRange);
    }
  }

  const std::array<uint64_t, kCriteoCategoricalFeatures>& vocabulary() const { return vocabulary_; }

  // Line `index` of `stream`: its features, then its label's uniform draw.
  Features Draw(uint64_t stream, uint64_t index, double* label_uniform) const {
    SplitMix64Rng rng(SeedMix(seed_, {stream, index}));
    Features x;
    for (int k = 0; k < kCriteoIntegerFeatures; ++k) x.integers[k] = DrawInteger(k, rng);
    for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
      bool missing = rng.Uniform() < kCategorical[f].missing;
      uint64_t rank = zipf_[f](rng);
      x.ranks[f] = missing ? -1 : static_cast<int64_t>(rank);
    }
    *label_uniform = rng.Uniform();
    return x;
  }

  // The factorisation machine's score before calibration.
  double Raw(const Features& x) const {
    double linear = 0, squares = 0;
    std::array<double, kLatentDim> sum{};
    for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
      if (x.ranks[f] < 0) continue;
      uint64_t h = SeedMix(field_key_[f], static_cast<uint64_t>(x.ranks[f]));
      linear += Symmetric16(h, 1.0);
      for (int half = 0; half < 2; ++half) {
        uint64_t bits = SeedMix(h, half + 1);
        for (int d = 0; d < kLatentDim / 2; ++d, bits >>= 16) {
          double v = Symmetric16(bits, kLatentRange);
          sum[half * kLatentDim / 2 + d] += v;
          squares += v * v;
        }
      }
    }
    double pairs = -squares;
    for (double s : sum) pairs += s * s;
    double integers = 0;
    for (int k = 0; k < kCriteoIntegerFeatures; ++k) {
      if (x.integers[k].has_value()) {
        integers += integer_weight_[k] *
                    std::log1p(static_cast<double>(std::max<int64_t>(*x.integers[k], 0)));
      }
    }
    return linear + 0.5 * pairs + integers;
  }

  // The value field f writes for `rank`: a bijection of 32-bit values keyed by
  // the seed and the field (the "lowbias32" mixer), so ranks never collide.
  uint32_t Hashed(int f, uint64_t rank) const {
    auto x = static_cast<uint32_t>(rank) ^ static_cast<uint32_t>(field_key_[f] >> 32);
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
  }

 private:
  static std::optional<int64_t> DrawInteger(int k, SplitMix64Rng& rng) {
    const IntegerSpec& spec = kInteger[k];
    double u = rng.Uniform();
    if (u < spec.missing) return std::nullopt;
    if (u < spec.missing + spec.negative) return -1 - static_cast<int64_t>(rng.Next() % 3);
    double lomax = spec.scale * (std::pow(1 - rng.Uniform(), -1 / kLomaxShape) - 1);
    return static_cast<int64_t>(std::min(lomax, kIntegerMax));
  }

  uint64_t seed_;
  std::array<uint64_t, kCriteoCategoricalFeatures> vocabulary_;
  std::vector<ZipfSampler> zipf_;
  std::array<uint64_t, kCriteoCategoricalFeatures> field_key_{};
  std::array<double, kCriteoIntegerFeatures> integer_weight_{};
};

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// logit = bias + scale * (raw - center).
struct Calibration {
  double center = 0;
  double scale = 0;
  double bias = 0;
  double Probability(double raw) const { return Sigmoid(bias + scale * (raw - center)); }
};

// Fits the calibration on a pilot sample: the standard deviation of the
// logits, then (by bisection) the bias giving the mean probability asked for.
Calibration Calibrate(const Generator& generator, const CriteoSynthOptions& options) {
  std::vector<double> raw(kPilotRecords);
  double mean = 0;
  for (uint64_t i = 0; i < kPilotRecords; ++i) {
    double unused;
    raw[i] = generator.Raw(generator.Draw(kPilotStream, i, &unused));
    mean += raw[i];
  }
  mean /= kPilotRecords;
  double variance = 0;
  for (double r : raw) variance += (r - mean) * (r - mean);
  double stddev = std::sqrt(variance / kPilotRecords);
  Calibration c;
  c.center = mean;
  c.scale = stddev > 0 ? options.logit_stddev / stddev : 0;
  double lo = -30, hi = 30;
  for (int iteration = 0; iteration < 60; ++iteration) {
    c.bias = (lo + hi) / 2;
    double p = 0;
    for (double r : raw) p += c.Probability(r);
    (p / kPilotRecords < options.click_rate ? lo : hi) = c.bias;
  }
  c.bias = (lo + hi) / 2;
  return c;
}

char* AppendHex8(uint32_t v, char* out) {
  constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 7; i >= 0; --i, v >>= 4) out[i] = kDigits[v & 0xf];
  return out + 8;
}

// One TSV line (with its newline) into `buffer`; returns its length.
size_t FormatLine(const Generator& generator, const Features& x, int label, char* buffer) {
  char* out = buffer;
  *out++ = static_cast<char>('0' + label);
  for (const auto& v : x.integers) {
    *out++ = '\t';
    if (v.has_value()) out = std::to_chars(out, out + 24, *v).ptr;
  }
  for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
    *out++ = '\t';
    if (x.ranks[f] >= 0) out = AppendHex8(generator.Hashed(f, x.ranks[f]), out);
  }
  *out++ = '\n';
  return out - buffer;
}

nlohmann::ordered_json TruthJson(const CriteoSynthTruth& truth, const CriteoSynthOptions& options) {
  nlohmann::ordered_json j;
  j["file"] = truth.file;
  j["seed"] = options.seed;
  j["records"] = truth.records;
  j["clicks"] = truth.clicks;
  j["click_rate"] = truth.click_rate;
  j["optimum_auc"] =
      truth.optimum_auc.has_value() ? nlohmann::ordered_json(*truth.optimum_auc) : nullptr;
  j["optimum_log_loss"] = truth.optimum_log_loss;
  j["constant_log_loss"] = truth.constant_log_loss;
  j["generator"] = {{"zipf", options.zipf},
                    {"vocabulary_scale", options.vocabulary_scale},
                    {"latent_dim", kLatentDim},
                    {"target_click_rate", options.click_rate},
                    {"logit_stddev", options.logit_stddev}};
  auto& categorical = j["categorical"];
  for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
    categorical[CriteoFieldName(1 + kCriteoIntegerFeatures + f)] = {
        {"vocabulary", truth.vocabulary[f]}, {"distinct", truth.distinct[f]}};
  }
  return j;
}

// The figures of a written file from its true probabilities and labels.
void Summarize(const std::vector<double>& p, const std::vector<uint8_t>& labels,
               CriteoSynthTruth* truth) {
  truth->records = p.size();
  double log_loss = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    truth->clicks += labels[i];
    log_loss -= std::log(std::max(labels[i] ? p[i] : 1 - p[i], 1e-15));
  }
  double n = static_cast<double>(p.size());
  truth->click_rate = static_cast<double>(truth->clicks) / n;
  truth->optimum_log_loss = log_loss / n;
  double c = truth->click_rate;
  truth->constant_log_loss = c <= 0 || c >= 1 ? 0 : -(c * std::log(c) + (1 - c) * std::log(1 - c));
  truth->optimum_auc = ExactAuc(p, labels);
}

// Draws and writes `records` lines of `stream` to `path`, keeping each line's
// true probability and label and marking the values that occur.
Status WriteLines(const Generator& generator, const Calibration& calibration,
                  const std::string& path, uint64_t stream, std::vector<double>* p,
                  std::vector<uint8_t>* labels, std::vector<std::vector<bool>>* seen) {
  EDL_ASSIGN_OR_RETURN(auto file, WritableFile::Create(path));
  char line[1024];  // a line takes at most 509 bytes
  for (uint64_t i = 0; i < p->size(); ++i) {
    double u;
    Features x = generator.Draw(stream, i, &u);
    (*p)[i] = calibration.Probability(generator.Raw(x));
    (*labels)[i] = u < (*p)[i] ? 1 : 0;
    for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
      if (x.ranks[f] >= 0) (*seen)[f][x.ranks[f]] = true;
    }
    size_t length = FormatLine(generator, x, (*labels)[i], line);
    EDL_RETURN_IF_ERROR(file->Append(std::string_view(line, length)));
  }
  return file->Close();
}

StatusOr<CriteoSynthTruth> WriteFile(const Generator& generator, const Calibration& calibration,
                                     const CriteoSynthOptions& options, const std::string& path,
                                     uint64_t stream, uint64_t records) {
  CriteoSynthTruth truth;
  truth.file = path;
  truth.truth_file = path + ".truth.json";
  truth.vocabulary = generator.vocabulary();
  std::vector<std::vector<bool>> seen(kCriteoCategoricalFeatures);
  for (int f = 0; f < kCriteoCategoricalFeatures; ++f) seen[f].resize(truth.vocabulary[f]);
  std::vector<double> p(records);
  std::vector<uint8_t> labels(records);
  // As the other data commands do: the directories the file goes in.
  if (std::string dir = std::filesystem::path(path).parent_path().string(); !dir.empty()) {
    EDL_RETURN_IF_ERROR(CreateDirectories(dir));
  }
  const std::string partial = path + ".partial";
  Status written = WriteLines(generator, calibration, partial, stream, &p, &labels, &seen);
  if (written.ok()) written = SyncFile(partial);
  if (written.ok() && std::rename(partial.c_str(), path.c_str()) != 0) {
    written = ErrnoToStatus(errno, StrCat(path, ": cannot rename ", partial));
  }
  if (!written.ok()) {
    std::remove(partial.c_str());
    return written;
  }
  for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
    truth.distinct[f] = std::count(seen[f].begin(), seen[f].end(), true);
  }
  Summarize(p, labels, &truth);
  EDL_RETURN_IF_ERROR(
      WriteFileAtomically(truth.truth_file, TruthJson(truth, options).dump(2) + "\n"));
  return truth;
}

Status Validate(const CriteoSynthOptions& options) {
  if (options.output.empty()) return absl::InvalidArgumentError("an output file is required");
  if (options.records == 0) return absl::InvalidArgumentError("--records must be positive");
  if (options.test_output.empty() != (options.test_records == 0)) {
    return absl::InvalidArgumentError("--test_records and --test_output go together");
  }
  if (!(options.zipf > 0)) return absl::InvalidArgumentError("--zipf must be positive");
  if (!(options.vocabulary_scale > 0)) {
    return absl::InvalidArgumentError("--vocabulary_scale must be positive");
  }
  for (uint64_t v : CriteoSynthVocabulary(options.vocabulary_scale)) {
    if (v > (uint64_t{1} << 32)) {
      return absl::InvalidArgumentError(StrCat("--vocabulary_scale ", options.vocabulary_scale,
                                               " makes a vocabulary of ", v,
                                               " values; at most 2^32 are allowed"));
    }
  }
  if (!(options.click_rate > 0 && options.click_rate < 1)) {
    return absl::InvalidArgumentError("--click_rate must lie strictly between 0 and 1");
  }
  if (!(options.logit_stddev > 0)) {
    return absl::InvalidArgumentError("--logit_stddev must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

std::array<uint64_t, kCriteoCategoricalFeatures> CriteoSynthVocabulary(double scale) {
  std::array<uint64_t, kCriteoCategoricalFeatures> sizes{};
  for (int f = 0; f < kCriteoCategoricalFeatures; ++f) {
    double v = std::round(static_cast<double>(kCategorical[f].vocabulary) * scale);
    sizes[f] = v < 1 ? 1 : v > 0x1p62 ? uint64_t{1} << 62 : static_cast<uint64_t>(v);
  }
  return sizes;
}

std::optional<double> ExactAuc(const std::vector<double>& scores,
                               const std::vector<uint8_t>& labels) {
  std::vector<std::pair<double, uint8_t>> sorted(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) sorted[i] = {scores[i], labels[i] != 0};
  std::sort(sorted.begin(), sorted.end());
  double positives = 0, positive_rank_sum = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    double group_positives = 0;
    for (; j < sorted.size() && sorted[j].first == sorted[i].first; ++j) {
      group_positives += sorted[j].second;
    }
    // Ranks i+1..j share their mean.
    positive_rank_sum += group_positives * (static_cast<double>(i + 1 + j) / 2);
    positives += group_positives;
    i = j;
  }
  double negatives = static_cast<double>(sorted.size()) - positives;
  if (positives == 0 || negatives == 0) return std::nullopt;
  return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

StatusOr<std::vector<CriteoSynthTruth>> SynthesizeCriteo(const CriteoSynthOptions& options) {
  EDL_RETURN_IF_ERROR(Validate(options));
  Generator generator(options);
  Calibration calibration = Calibrate(generator, options);
  std::vector<CriteoSynthTruth> truths;
  EDL_ASSIGN_OR_RETURN(
      truths.emplace_back(),
      WriteFile(generator, calibration, options, options.output, kTrainStream, options.records));
  if (options.test_records > 0) {
    EDL_ASSIGN_OR_RETURN(truths.emplace_back(),
                         WriteFile(generator, calibration, options, options.test_output,
                                   kTestStream, options.test_records));
  }
  return truths;
}

}  // namespace elasticdl
