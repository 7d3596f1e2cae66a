// embedding_bench: how fast a parameter server serves embedding rows, how
// much memory a row costs, and the bare LibTorch loop DeepFM is held against.
//
//   embedding_bench [--only=rows,scale,spread,bare] [flags]
//
// rows     P5. One parameter-server process (forked: the real store behind
//          the real gRPC service on 127.0.0.1), one table of dimension 16
//          (float32, Adagrad) holding --rows rows. Clients (--clients
//          threads, one request in flight each) send requests of --batch
//          unique ids drawn from a Zipf distribution (--zipf) over --vocab
//          values, as a worker sends the unique ids of a minibatch: rows/s
//          of pull (PullRows) and of push (sparse gradients, applied by
//          Adagrad). Beside them, in this process and on one core, the
//          machine's bounds for the same rows: memcpy of the rows' bytes,
//          and a lookup loop (absl::flat_hash_map id -> row, then memcpy of
//          the row); and the store's own table read without RPC. With
//          --credentials=FILE (a job's credentials file) the server and the
//          clients speak mutual TLS with them, as a job does; without,
//          plaintext (--insecure_transport).
// scale    For each size in --scale_rows (default 1M, 10M, 50M rows of
//          dimension 16, Adagrad: one slot): a fresh server filled with that
//          many rows; bytes per row (the server's resident memory grown,
//          divided by the rows) and the latency of a pull of --batch Zipf
//          ids (median and 99th percentile of 200).
// spread   A table of --spread_rows rows (default 50M) against servers with
//          a budget of --budget rows each (max_rows_per_server; default
//          20M): on one server the budget evicts rows (read back at their
//          initial value: lost), on --spread_servers (default 3) every row
//          is kept. Every row is pushed once (SGD, lr 1, gradient 1 from a
//          zero initializer) and read back.
// bare     DeepFM's bare loop (P4's baseline): the zoo's dataset_fn and loss
//          (model_zoo/deepfm/deepfm.cc compiled in) on the files of --data,
//          batch(--minibatch), and the same network with its two tables as
//          torch::nn::EmbeddingBag of --bare_table_rows rows (ids taken
//          modulo), sparse gradients; Adagrad on the touched rows for the
//          tables as the zoo's tables use, Adam for the rest. samples/s after --warmup
//          minibatches, with --threads intra-op threads.
//
// Machine-readable lines start with "RESULT ".
#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_format.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/blas_kernels.h"
#include "common/strings.h"
#include "common/zipf.h"
#include "elasticdl/data/dataset.h"
#include "mnist_tasks.h"
#include "ps/embedding_table.h"
#include "ps/parameter_store.h"
#include "ps/placement.h"
#include "ps/ps_service.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"
#include "rpc/ps_client.h"

namespace elasticdl::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Flags {
  std::string only;
  // A job's credentials file: P5 over mutual TLS; empty: plaintext.
  std::string credentials;
  int64_t dim = 16;
  int64_t batch = 4096;
  int64_t rows = 2'000'000;
  int64_t vocab = 10'000'000;
  double zipf = 1.1;
  int clients = 2;
  double seconds = 3;
  std::vector<int64_t> scale_rows = {1'000'000, 10'000'000, 50'000'000};
  int64_t spread_rows = 50'000'000;
  int64_t budget = 20'000'000;
  int spread_servers = 3;
  std::string data;
  int64_t records = -1;
  int64_t minibatch = 512;
  int threads = 2;
  int warmup = 5;
  int64_t bare_table_rows = int64_t{1} << 22;
};

// The id of Zipf rank r: spread over the int64 range as hashed features are.
int64_t IdOfRank(uint64_t rank) { return static_cast<int64_t>(SplitMix64(rank) >> 1); }

// Requests of `batch` unique ids each, Zipf over `vocab` ranks.
std::vector<std::vector<int64_t>> ZipfRequests(const Flags& f, int count, uint64_t vocab,
                                               uint64_t seed) {
  ZipfSampler zipf(vocab, f.zipf);
  SplitMix64Rng rng(seed);
  std::vector<std::vector<int64_t>> requests(static_cast<size_t>(count));
  for (auto& ids : requests) {
    absl::flat_hash_map<int64_t, bool> seen;
    while (static_cast<int64_t>(ids.size()) < f.batch) {
      int64_t id = IdOfRank(zipf(rng));
      if (seen.emplace(id, true).second) ids.push_back(id);
    }
  }
  return requests;
}

// -- a parameter server in a child process ----------------------------------

// The server side: `embedding_bench --serve=PS_ID,NUM_PS,DIM,OPTIMIZER,ZEROS,MAX_ROWS
// --serve_fd=FD` serves one table "t" and writes its address to FD.
// OPTIMIZER: adagrad (lr 0.01) or sgd (lr 1).
[[noreturn]] void Serve(const std::string& what, int fd, const std::string& credentials_file) {
  std::vector<int64_t> v;
  for (std::string_view s(what); !s.empty();) {
    size_t comma = s.find(',');
    std::string part(s.substr(0, comma));
    v.push_back(part == "adagrad" ? 0 : part == "sgd" ? 1 : std::atoll(part.c_str()));
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
  }
  if (v.size() != 6) Die(absl::InvalidArgumentError("--serve takes 6 values"));
  torch::set_num_threads(1);
  ps::ParameterStoreOptions options;
  if (v[3] == 0) {
    options.optimizer = torch::optim::AdagradOptions(0.01);
  } else {
    options.optimizer = torch::optim::SGDOptions(1.0);
  }
  options.use_async = true;
  options.ps_id = static_cast<int>(v[0]);
  options.num_ps = static_cast<int>(v[1]);
  ps::ParameterStore store(options);
  proto::ModelValues values;
  proto::EmbeddingTableSpec* table = values.add_embedding_tables();
  table->set_name("t");
  table->set_dim(v[2]);
  table->set_dtype(proto::DT_FLOAT32);
  table->set_seed(7);
  table->mutable_initializer()->set_kind(v[4] != 0 ? proto::EmbeddingInitializer::ZEROS
                                                   : proto::EmbeddingInitializer::UNIFORM);
  table->mutable_initializer()->set_a(-0.05);
  table->mutable_initializer()->set_b(0.05);
  table->set_max_rows(v[5]);
  bool accepted = false;
  int64_t version = 0;
  if (Status s = store.Init(values, &accepted, &version); !s.ok()) Die(s);
  ps::PsService service(&store, /*token=*/"");
  std::string address;
  const rpc::JobCredentials credentials = credentials_file.empty()
                                              ? rpc::JobCredentials{}
                                              : OrDie(rpc::ReadCredentialsFile(credentials_file));
  auto server = OrDie(rpc::StartServer("127.0.0.1", 0, {&service}, &address, credentials));
  if (write(fd, address.data(), address.size()) != static_cast<ssize_t>(address.size())) _exit(1);
  close(fd);
  server->Wait();
  _exit(0);
}

struct TableSetup {
  int64_t dim = 16;
  bool sgd = false;  // SGD lr 1; else Adagrad lr 0.01
  bool zeros = false;
  int64_t max_rows = 0;
  // The credentials file the server serves with (TLS); empty: plaintext.
  std::string credentials;
};

// A parameter server in a process of its own: this program again, with
// --serve (a fresh process: no threads or gRPC state forked).
class ServerProcess {
 public:
  ServerProcess(const TableSetup& setup, int ps_id, int num_ps) {
    int fds[2];
    if (pipe(fds) != 0) Die(absl::InternalError("pipe failed"));
    const std::string serve =
        StrCat("--serve=", ps_id, ",", num_ps, ",", setup.dim, ",", setup.sgd ? "sgd" : "adagrad",
               ",", setup.zeros ? 1 : 0, ",", setup.max_rows);
    const std::string serve_fd = StrCat("--serve_fd=", fds[1]);
    const std::string credentials = StrCat("--credentials=", setup.credentials);
    pid_ = fork();
    if (pid_ < 0) Die(absl::InternalError("fork failed"));
    if (pid_ == 0) {
      close(fds[0]);
      execl("/proc/self/exe", "embedding_bench", serve.c_str(), serve_fd.c_str(),
            credentials.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    char buffer[256] = {};
    ssize_t n = read(fds[0], buffer, sizeof(buffer) - 1);
    close(fds[0]);
    if (n <= 0) Die(absl::InternalError("the server process did not start"));
    address_.assign(buffer, static_cast<size_t>(n));
  }
  ~ServerProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  const std::string& address() const { return address_; }
  // CPU time the server has used, seconds.
  double CpuSeconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Fields after the command's closing parenthesis; utime and stime are
    // the 12th and 13th of them.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 1; i <= 13 && rest >> field; ++i) {
      if (i >= 12) ticks += std::atof(field.c_str());
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  // Resident memory of the server, bytes.
  int64_t Rss() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
    }
    return 0;
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

// Clients of a set of servers, sending rows of table "t" to their shards.
class RowClient {
 public:
  RowClient(const std::vector<std::string>& addresses, int64_t dim,
            const rpc::JobCredentials& credentials = {})
      : client_(addresses, credentials),
        dim_(dim),
        num_shards_(static_cast<int>(addresses.size())) {}

  // Pulls `ids`; the rows land in *rows (ids.size() x dim).
  void Pull(const std::vector<int64_t>& ids, std::vector<float>* rows) {
    std::vector<proto::PullRowsRequest> requests(static_cast<size_t>(num_shards_));
    std::vector<int> shard_of(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      shard_of[i] = ps::RowShardOf(ids[i], num_shards_);
      auto& r = requests[static_cast<size_t>(shard_of[i])];
      if (r.tables_size() == 0) r.add_tables()->set_table("t");
      r.mutable_tables(0)->add_ids(ids[i]);
    }
    std::vector<proto::PullRowsResponse> responses;
    if (Status s = client_.PullRows(requests, &responses, Shards(requests)); !s.ok()) Die(s);
    rows->resize(ids.size() * static_cast<size_t>(dim_));
    std::vector<size_t> next(static_cast<size_t>(num_shards_), 0);
    const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto shard = static_cast<size_t>(shard_of[i]);
      std::memcpy(rows->data() + i * static_cast<size_t>(dim_),
                  responses[shard].tables(0).values().data() + next[shard]++ * row_bytes,
                  row_bytes);
    }
  }

  // Pushes the gradient rows `grads` (ids.size() x dim) of `ids`.
  void Push(const std::vector<int64_t>& ids, const float* grads) {
    std::vector<proto::PushRequest> requests(static_cast<size_t>(num_shards_));
    const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto& r = requests[static_cast<size_t>(ps::RowShardOf(ids[i], num_shards_))];
      if (r.sparse_gradients_size() == 0) r.add_sparse_gradients()->set_table("t");
      proto::EmbeddingRows* rows = r.mutable_sparse_gradients(0);
      rows->add_ids(ids[i]);
      rows->mutable_values()->append(reinterpret_cast<const char*>(grads) + i * row_bytes,
                                     row_bytes);
    }
    std::vector<int> shards;
    for (int s = 0; s < num_shards_; ++s) {
      if (requests[static_cast<size_t>(s)].sparse_gradients_size() > 0) shards.push_back(s);
    }
    std::vector<proto::PushResponse> responses;
    if (Status s = client_.Push(&requests, &responses, shards); !s.ok()) Die(s);
    for (int s : shards) {
      if (!responses[static_cast<size_t>(s)].accepted()) {
        Die(absl::InternalError("a push was refused"));
      }
    }
  }

 private:
  static std::vector<int> Shards(const std::vector<proto::PullRowsRequest>& requests) {
    std::vector<int> shards;
    for (size_t s = 0; s < requests.size(); ++s) {
      if (requests[s].tables_size() > 0) shards.push_back(static_cast<int>(s));
    }
    return shards;
  }

  rpc::PsClient client_;
  int64_t dim_;
  int num_shards_;
};

// Pushes a gradient of `value` to ids IdOfRank(0..count), in requests of
// `chunk` ids.
void Fill(RowClient& client, int64_t count, int64_t dim, float value, int64_t chunk = 32768) {
  std::vector<int64_t> ids;
  std::vector<float> grads(static_cast<size_t>(chunk * dim), value);
  for (int64_t start = 0; start < count; start += chunk) {
    ids.clear();
    for (int64_t r = start; r < std::min(count, start + chunk); ++r) {
      ids.push_back(IdOfRank(static_cast<uint64_t>(r)));
    }
    client.Push(ids, grads.data());
  }
}

// `clients` threads sending `op` over `requests` in turn for `seconds`;
// returns ids per second.
template <typename Op>
double Throughput(const Flags& f, const std::vector<std::vector<int64_t>>& requests, Op op) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> ids{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < f.clients; ++c) {
    threads.emplace_back([&, c] {
      int64_t mine = 0;
      for (size_t i = static_cast<size_t>(c); !stop.load(); i = (i + 1) % requests.size()) {
        op(c, requests[i]);
        mine += static_cast<int64_t>(requests[i].size());
      }
      ids += mine;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(ids.load()) / Seconds(Clock::now() - start);
}

// Single-thread rows/s of `body`, run over `requests` for about `seconds`.
template <typename Body>
double Bound(const std::vector<std::vector<int64_t>>& requests, double seconds, Body body) {
  int64_t ids = 0;
  const auto start = Clock::now();
  size_t i = 0;
  while (Seconds(Clock::now() - start) < seconds) {
    body(requests[i]);
    ids += static_cast<int64_t>(requests[i].size());
    i = (i + 1) % requests.size();
  }
  return static_cast<double>(ids) / Seconds(Clock::now() - start);
}

void PrintRow(const char* name, double rows_per_s, double bound, const char* note) {
  std::printf("%-58s %12.2f M rows/s %7.3f  %s\n", name, rows_per_s / 1e6, rows_per_s / bound,
              note);
}

void RunRows(const Flags& f) {
  const int64_t dim = f.dim;
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  std::vector<std::vector<int64_t>> requests =
      ZipfRequests(f, 256, static_cast<uint64_t>(f.vocab), 1);
  std::printf(
      "# rows: dimension %lld float32, requests of %lld unique Zipf(%.2f) ids over %lld values, "
      "table of %lld rows (Adagrad), %d client threads, %.0f s per figure\n",
      (long long)dim, (long long)f.batch, f.zipf, (long long)f.vocab, (long long)f.rows, f.clients,
      f.seconds);

  // The bounds, in this process on one core.
  std::vector<float> table(static_cast<size_t>(f.rows * dim));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 97) * 1e-3f;
  absl::flat_hash_map<int64_t, uint32_t> index;
  index.reserve(static_cast<size_t>(f.rows));
  for (int64_t r = 0; r < f.rows; ++r) index[IdOfRank(static_cast<uint64_t>(r))] = uint32_t(r);
  std::vector<float> out(static_cast<size_t>(f.batch * dim));
  std::vector<float> source(out.size(), 1.0f);
  const double memcpy_rows = Bound(requests, f.seconds, [&](const std::vector<int64_t>& ids) {
    std::memcpy(out.data(), source.data(), ids.size() * row_bytes);
    asm volatile("" : : "r"(out.data()) : "memory");
  });
  const double lookup_rows = Bound(requests, f.seconds, [&](const std::vector<int64_t>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = index.find(ids[i]);
      const float* row = it == index.end() ? source.data() : table.data() + it->second * dim;
      std::memcpy(out.data() + i * static_cast<size_t>(dim), row, row_bytes);
    }
    asm volatile("" : : "r"(out.data()) : "memory");
  });
  table = {};
  index = {};
  // The store's own table, no RPC: filled the same way.
  proto::EmbeddingTableSpec spec;
  spec.set_name("t");
  spec.set_dim(dim);
  spec.set_dtype(proto::DT_FLOAT32);
  spec.mutable_initializer()->set_kind(proto::EmbeddingInitializer::UNIFORM);
  spec.mutable_initializer()->set_a(-0.05);
  spec.mutable_initializer()->set_b(0.05);
  proto::OptimizerConfig adagrad;
  adagrad.mutable_adagrad()->set_lr(0.01);
  {
    auto local = OrDie(ps::EmbeddingTable::Create(spec, adagrad));
    std::vector<int64_t> ids;
    std::vector<float> grads(32768 * static_cast<size_t>(dim), 0.01f);
    for (int64_t start = 0; start < f.rows; start += 32768) {
      ids.clear();
      for (int64_t r = start; r < std::min(f.rows, start + 32768); ++r) {
        ids.push_back(IdOfRank(static_cast<uint64_t>(r)));
      }
      local->Apply(ids.data(), ids.size(), reinterpret_cast<const char*>(grads.data()), 1.0, 1,
                   local->base_lr());
    }
    const double read_rows = Bound(requests, f.seconds, [&](const std::vector<int64_t>& ids) {
      local->Read(ids.data(), ids.size(), reinterpret_cast<char*>(out.data()));
    });
    const double apply_rows = Bound(requests, f.seconds, [&](const std::vector<int64_t>& ids) {
      local->Apply(ids.data(), ids.size(), reinterpret_cast<const char*>(source.data()), 1e-6, 2,
                   local->base_lr());
    });
    std::printf("%-58s %12s %7s\n", "", "", "ratio to the lookup bound");
    PrintRow("memcpy of the rows' bytes (1 core)", memcpy_rows, lookup_rows,
             "info: the copy alone");
    PrintRow("flat_hash_map lookup + memcpy per row (1 core): bound", lookup_rows, lookup_rows,
             "the bound");
    PrintRow("store's table, Read, no RPC (1 core)", read_rows, lookup_rows, "info");
    PrintRow("store's table, Apply Adagrad, no RPC (1 core)", apply_rows, lookup_rows, "info");
    std::printf("RESULT rows_bounds memcpy=%.0f lookup=%.0f table_read=%.0f table_apply=%.0f\n",
                memcpy_rows, lookup_rows, read_rows, apply_rows);
  }

  // Over RPC, one server process.
  TableSetup setup;
  setup.dim = dim;
  setup.credentials = f.credentials;
  const rpc::JobCredentials credentials = f.credentials.empty()
                                              ? rpc::JobCredentials{}
                                              : OrDie(rpc::ReadCredentialsFile(f.credentials));
  std::printf("# rows over RPC: %s\n", credentials.uses_tls() ? "mutual TLS" : "plaintext");
  ServerProcess server(setup, 0, 1);
  {
    RowClient filler({server.address()}, dim, credentials);
    Fill(filler, f.rows, dim, 0.01f);
  }
  std::vector<std::unique_ptr<RowClient>> clients;
  for (int c = 0; c < f.clients; ++c) {
    clients.push_back(
        std::make_unique<RowClient>(std::vector<std::string>{server.address()}, dim, credentials));
  }
  std::vector<std::vector<float>> buffers(static_cast<size_t>(f.clients));
  // The server's cores: CPU seconds it used per second of the figure.
  auto server_cores = [&](auto run) {
    const double cpu0 = server.CpuSeconds();
    const auto t0 = Clock::now();
    const double rate = run();
    return std::make_pair(rate, (server.CpuSeconds() - cpu0) / Seconds(Clock::now() - t0));
  };
  const auto [pull, pull_cores] = server_cores([&] {
    return Throughput(f, requests, [&](int c, const std::vector<int64_t>& ids) {
      clients[static_cast<size_t>(c)]->Pull(ids, &buffers[static_cast<size_t>(c)]);
    });
  });
  std::vector<float> grads(static_cast<size_t>(f.batch * dim), 1e-4f);
  const auto [push, push_cores] = server_cores([&] {
    return Throughput(f, requests, [&](int c, const std::vector<int64_t>& ids) {
      clients[static_cast<size_t>(c)]->Push(ids, grads.data());
    });
  });
  const std::string pull_note = StrCat(pull >= 5e6 ? "goal met" : "goal NOT met", "; server busy ",
                                       absl::StrFormat("%.2f", pull_cores),
                                       " cores: ", absl::StrFormat("%.2f", pull / pull_cores / 1e6),
                                       " M rows/s per server core");
  const std::string push_note = StrCat(push >= 5e6 ? "goal met" : "goal NOT met", "; server busy ",
                                       absl::StrFormat("%.2f", push_cores),
                                       " cores: ", absl::StrFormat("%.2f", push / push_cores / 1e6),
                                       " M rows/s per server core");
  PrintRow("P5 pull, 1 server process over loopback gRPC (goal >= 5 M)", pull, lookup_rows,
           pull_note.c_str());
  PrintRow("P5 push (Adagrad), 1 server process over loopback gRPC", push, lookup_rows,
           push_note.c_str());
  std::printf(
      "RESULT rows pull=%.0f push=%.0f pull_MBps=%.1f push_MBps=%.1f pull_server_cores=%.2f "
      "push_server_cores=%.2f\n",
      pull, push, pull * static_cast<double>(row_bytes) / 1e6,
      push * static_cast<double>(row_bytes) / 1e6, pull_cores, push_cores);
  std::fflush(stdout);
}

void RunScale(const Flags& f) {
  std::printf(
      "# scale: dimension %lld float32, Adagrad (one slot per row); a pull is %lld Zipf "
      "ids of the table's rows\n",
      (long long)f.dim, (long long)f.batch);
  for (int64_t n : f.scale_rows) {
    TableSetup setup;
    setup.dim = f.dim;
    ServerProcess server(setup, 0, 1);
    RowClient client({server.address()}, f.dim);
    const int64_t before = server.Rss();
    const auto start = Clock::now();
    Fill(client, n, f.dim, 0.01f);
    const double fill_s = Seconds(Clock::now() - start);
    const int64_t after = server.Rss();
    std::vector<std::vector<int64_t>> requests = ZipfRequests(f, 220, static_cast<uint64_t>(n), 2);
    std::vector<double> ms;
    std::vector<float> rows;
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto t0 = Clock::now();
      client.Pull(requests[i], &rows);
      if (i >= 20) ms.push_back(Seconds(Clock::now() - t0) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    const double per_row = static_cast<double>(after - before) / static_cast<double>(n);
    std::printf(
        "%-12s %6.1f bytes/row (values %lld + slot %lld + the rest)  server RSS %.2f GB  "
        "pull of %lld ids: median %.2f ms, p99 %.2f ms  (filled at %.2f M rows/s)\n",
        (std::to_string(n / 1'000'000) + "M rows").c_str(), per_row, (long long)(f.dim * 4),
        (long long)(f.dim * 4), after / 1e9, (long long)f.batch, ms[ms.size() / 2],
        ms[ms.size() * 99 / 100], n / fill_s / 1e6);
    std::printf(
        "RESULT scale rows=%lld bytes_per_row=%.1f rss=%lld pull_median_ms=%.3f "
        "pull_p99_ms=%.3f fill_rows_per_s=%.0f\n",
        (long long)n, per_row, (long long)after, ms[ms.size() / 2], ms[ms.size() * 99 / 100],
        n / fill_s);
    std::fflush(stdout);
  }
}

void RunSpread(const Flags& f) {
  std::printf(
      "# spread: %lld rows of dimension %lld, budget %lld rows per server "
      "(max_rows_per_server); each row pushed once, then all read back\n",
      (long long)f.spread_rows, (long long)f.dim, (long long)f.budget);
  for (int servers : {1, f.spread_servers}) {
    TableSetup setup;
    setup.dim = f.dim;
    setup.sgd = true;
    setup.zeros = true;
    setup.max_rows = f.budget;
    std::vector<std::unique_ptr<ServerProcess>> processes;
    std::vector<std::string> addresses;
    for (int s = 0; s < servers; ++s) {
      processes.push_back(std::make_unique<ServerProcess>(setup, s, servers));
      addresses.push_back(processes.back()->address());
    }
    RowClient client(addresses, f.dim);
    Fill(client, f.spread_rows, f.dim, 1.0f);  // every row: 0 - 1 * 1 = -1
    int64_t kept = 0;
    int64_t lost = 0;
    std::vector<int64_t> ids;
    std::vector<float> rows;
    const int64_t chunk = 32768;
    for (int64_t start = 0; start < f.spread_rows; start += chunk) {
      ids.clear();
      for (int64_t r = start; r < std::min(f.spread_rows, start + chunk); ++r) {
        ids.push_back(IdOfRank(static_cast<uint64_t>(r)));
      }
      client.Pull(ids, &rows);
      for (size_t i = 0; i < ids.size(); ++i) {
        const float v = rows[i * static_cast<size_t>(f.dim)];
        if (v == -1.0f) {
          ++kept;
        } else {
          ++lost;
        }
      }
    }
    int64_t rss = 0;
    for (const auto& p : processes) rss = std::max(rss, p->Rss());
    std::printf(
        "%d server%s: %lld rows kept, %lld lost (read back at their initial value); "
        "largest server RSS %.2f GB\n",
        servers, servers == 1 ? " " : "s", (long long)kept, (long long)lost, rss / 1e9);
    std::printf("RESULT spread servers=%d rows=%lld budget=%lld kept=%lld lost=%lld\n", servers,
                (long long)f.spread_rows, (long long)f.budget, (long long)kept, (long long)lost);
    std::fflush(stdout);
  }
}

// -- DeepFM's bare loop -------------------------------------------------------

// model_zoo/deepfm/deepfm.cc's DeepFM with its tables in this process.
class BareDeepFM : public torch::nn::Module {
 public:
  BareDeepFM(int64_t table_rows, int64_t dim)
      : rows_(table_rows),
        dim_(dim),
        weights_(register_module(
            "weights",
            torch::nn::EmbeddingBag(
                torch::nn::EmbeddingBagOptions(table_rows, 1).mode(torch::kSum).sparse(true)))),
        factors_(register_module(
            "factors",
            torch::nn::EmbeddingBag(
                torch::nn::EmbeddingBagOptions(table_rows, dim).mode(torch::kSum).sparse(true)))),
        numbers_(register_module("numbers", torch::nn::Linear(13, 1))),
        deep_(register_module(
            "deep", torch::nn::Sequential(torch::nn::Linear(26 * dim + 13, 400), torch::nn::ReLU(),
                                          torch::nn::Linear(400, 400), torch::nn::ReLU(),
                                          torch::nn::Linear(400, 1)))) {
    torch::NoGradGuard no_grad;
    weights_->weight.zero_();
    factors_->weight.normal_(0, 0.01);
  }

  torch::Tensor forward(const FeatureMap& inputs) {
    torch::Tensor ids = inputs.at("ids").remainder(rows_);  // [batch, 26]
    const torch::Tensor& numbers = inputs.at("numbers");
    const int64_t batch = ids.size(0);
    torch::Tensor flat = ids.reshape({-1});
    torch::Tensor first =
        weights_->forward(flat, torch::arange(0, batch * 26, 26, torch::kInt64)).squeeze(1) +
        numbers_->forward(numbers).squeeze(1);
    torch::Tensor v = factors_->forward(flat, torch::arange(0, batch * 26, torch::kInt64))
                          .view({batch, 26, dim_});
    torch::Tensor second = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1);
    torch::Tensor deep = deep_->forward(torch::cat({v.flatten(1), numbers}, 1)).squeeze(1);
    return torch::sigmoid(first + second + deep).unsqueeze(1);
  }

  std::vector<torch::Tensor> tables() { return {weights_->weight, factors_->weight}; }
  std::vector<torch::Tensor> dense() {
    std::vector<torch::Tensor> out;
    for (const auto& p : numbers_->parameters()) out.push_back(p);
    for (const auto& p : deep_->parameters()) out.push_back(p);
    return out;
  }

 private:
  int64_t rows_, dim_;
  torch::nn::EmbeddingBag weights_, factors_;
  torch::nn::Linear numbers_;
  torch::nn::Sequential deep_;
};

// The zoo's DeepFM: Adagrad(0.05) for the tables, Adam(1e-3) for the rest.
constexpr double kTableLr = 0.05;
constexpr double kDenseLr = 1e-3;

// Adagrad on the rows of a sparse gradient only (LibTorch's C++ Adagrad
// would touch the whole table): what the parameter servers do.
class SparseAdagrad {
 public:
  SparseAdagrad(std::vector<torch::Tensor> tables, double lr)
      : tables_(std::move(tables)), lr_(lr) {
    for (const auto& t : tables_) sums_.push_back(torch::zeros_like(t));
  }
  void step() {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tables_.size(); ++i) {
      torch::Tensor g = tables_[i].grad().coalesce();
      torch::Tensor rows = g.indices()[0];
      torch::Tensor values = g.values();
      torch::Tensor sum = sums_[i].index_select(0, rows) + values * values;
      sums_[i].index_copy_(0, rows, sum);
      tables_[i].index_add_(0, rows, values * (-lr_) / (sum.sqrt() + 1e-10));
    }
  }

 private:
  std::vector<torch::Tensor> tables_;
  std::vector<torch::Tensor> sums_;
  double lr_;
};

void RunBare(const Flags& f) {
  if (f.data.empty()) Die(absl::InvalidArgumentError("bare needs --data=DIR (Criteo shards)"));
  torch::manual_seed(1);
  auto library = OrDie(ZooLibrary::FromRegistry(&zoo_internal::LocalRegistry(), "bench"));
  ZooProgramNames names;
  names.model_def = "deepfm.deepfm.DeepFM";
  ZooProgram program = OrDie(ZooProgram::Resolve(std::move(library), names, ""));
  BareDeepFM model(f.bare_table_rows, 8);
  SparseAdagrad tables(model.tables(), kTableLr);
  torch::optim::Adam dense(model.dense(), torch::optim::AdamOptions(kDenseLr));
  // As the master cuts the data of the synchronous job compared with it.
  std::vector<Task> tasks = MakeTasks(f.data, static_cast<uint64_t>(f.minibatch) * 8, f.records,
                                      master::TaskSizes::kEven);
  int64_t n = 0, samples = 0;
  double loss_sum = 0;
  Clock::time_point start;
  for (const Task& t : tasks) {
    Dataset<Example> batches =
        OrDie(program.MakeDataset(ReadRecords(t.file, t.start, t.end), Mode::TRAINING))
            .batch(f.minibatch);
    while (std::optional<Example> batch = OrDie(batches.Next())) {
      if (n == f.warmup) start = Clock::now();
      for (auto& t : model.tables()) t.mutable_grad() = torch::Tensor();
      dense.zero_grad();
      torch::Tensor out = model.forward(batch->features);
      torch::Tensor loss = OrDie(program.Loss(batch->labels, out));
      loss.backward();
      tables.step();
      dense.step();
      if (n >= f.warmup) {
        samples += batch->labels.size(0);
        loss_sum += loss.item<double>() * static_cast<double>(batch->labels.size(0));
      }
      ++n;
    }
  }
  const double wall = Seconds(Clock::now() - start);
  std::printf(
      "bare DeepFM (EmbeddingBag, %lld-row tables), threads=%d: %.1f samples/s over "
      "%lld samples (mean loss %.4f)\n",
      (long long)f.bare_table_rows, f.threads, samples / wall, (long long)samples,
      loss_sum / static_cast<double>(samples));
  std::printf("RESULT bare samples_per_s=%.1f samples=%lld wall_s=%.2f\n", samples / wall,
              (long long)samples, wall);
}

std::vector<int64_t> ParseList(const char* v) {
  std::vector<int64_t> out;
  for (std::string_view s(v); !s.empty();) {
    size_t comma = s.find(',');
    out.push_back(std::atoll(std::string(s.substr(0, comma)).c_str()));
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
  }
  return out;
}

int Main(int argc, char** argv) {
  Flags f;
  std::string serve;
  int serve_fd = -1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view name) -> const char* {
      return a.substr(0, name.size()) == name ? argv[i] + name.size() : nullptr;
    };
    if (const char* v = value("--serve=")) {
      serve = v;
    } else if (const char* v = value("--serve_fd=")) {
      serve_fd = std::atoi(v);
    } else if (const char* v = value("--only=")) {
      f.only = v;
    } else if (const char* v = value("--credentials=")) {
      f.credentials = v;
    } else if (const char* v = value("--batch=")) {
      f.batch = std::atoll(v);
    } else if (const char* v = value("--rows=")) {
      f.rows = std::atoll(v);
    } else if (const char* v = value("--vocab=")) {
      f.vocab = std::atoll(v);
    } else if (const char* v = value("--zipf=")) {
      f.zipf = std::atof(v);
    } else if (const char* v = value("--clients=")) {
      f.clients = std::max(1, std::atoi(v));
    } else if (const char* v = value("--seconds=")) {
      f.seconds = std::atof(v);
    } else if (const char* v = value("--scale_rows=")) {
      f.scale_rows = ParseList(v);
    } else if (const char* v = value("--spread_rows=")) {
      f.spread_rows = std::atoll(v);
    } else if (const char* v = value("--budget=")) {
      f.budget = std::atoll(v);
    } else if (const char* v = value("--spread_servers=")) {
      f.spread_servers = std::max(2, std::atoi(v));
    } else if (const char* v = value("--data=")) {
      f.data = v;
    } else if (const char* v = value("--records=")) {
      f.records = std::atoll(v);
    } else if (const char* v = value("--minibatch=")) {
      f.minibatch = std::atoll(v);
    } else if (const char* v = value("--threads=")) {
      f.threads = std::max(1, std::atoi(v));
    } else if (const char* v = value("--warmup=")) {
      f.warmup = std::atoi(v);
    } else if (const char* v = value("--bare_table_rows=")) {
      f.bare_table_rows = std::atoll(v);
    } else {
      std::fprintf(stderr,
                   "usage: embedding_bench [--only=rows,scale,spread,bare] [--credentials=FILE] "
                   "[--batch=N] [--rows=N] "
                   "[--vocab=N] [--zipf=X] [--clients=N] [--seconds=X] [--scale_rows=N,N,...] "
                   "[--spread_rows=N] [--budget=N] [--spread_servers=N] [--data=DIR] "
                   "[--records=N] [--minibatch=N] [--threads=N] [--warmup=N] "
                   "[--bare_table_rows=N]\n");
      return 2;
    }
  }
  if (!serve.empty()) Serve(serve, serve_fd, f.credentials);
  torch::set_num_threads(f.threads);
  auto want = [&](std::string_view s) {
    if (f.only.empty()) return s != "bare" || !f.data.empty();
    return ("," + f.only + ",").find("," + std::string(s) + ",") != std::string::npos;
  };
  if (want("rows")) RunRows(f);
  if (want("scale")) RunScale(f);
  if (want("spread")) RunSpread(f);
  if (want("bare")) RunBare(f);
  return 0;
}

}  // namespace
}  // namespace elasticdl::bench

int main(int argc, char** argv) {
  // The bare loop runs the matrix kernels our workers run (common/blas_kernels.h).
  if (std::string failed = elasticdl::UseTheCpusBlasKernels(argv, elasticdl::ReadEnvironment());
      !failed.empty()) {
    std::fprintf(stderr, "%s\n", failed.c_str());
  }
  return elasticdl::bench::Main(argc, argv);
}
