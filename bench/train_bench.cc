// train_bench: the limits our training figures are compared against, and
// the cost of the parameter-server round trip that separates us from them.
//
//   train_bench --data=DIR [--threads=N] [--records=N] [--only=bare|tensors|ps] [--reps=N]
//               [--trace=FILE] [--bind_team=false]
//
// bare     The bare LibTorch loop: the SAME zoo entries a worker runs
//          (model_zoo/mnist/mnist_functional_api.cc is compiled into this
//          binary: custom_model, dataset_fn, loss, optimizer), the same
//          RecordIO files, read in the tasks the master makes of them for
//          a synchronous job (at most 64 x 8 records, each file's records
//          dealt evenly: 500 a task of a 10 000-record file, the last of its
//          8 minibatches 52 records) through dataset_fn (tf.Example parsing,
//          /255, shuffle(1024)) and batch(64), then forward, loss, backward
//          and the optimizer's step in this process. What a worker does,
//          minus the parameter server.
// tensors  The same loop on batches decoded beforehand: the compute-only
//          limit, and (against `bare`) what the data pipeline costs.
// ps       The parameter-server round trip of one minibatch for this model:
//          an in-process ParameterStore behind the real gRPC service, a
//          PsClient and a ShardedModel as the worker uses them. Per
//          iteration, as a worker within a task: FillPush, then PushFrom
//          (the server checks and decodes the gradients, applies SGD and
//          answers with the values after the step, which the client copies
//          into the model as they arrive). The pull
//          a worker makes at the start of a task (all values: the version
//          moved) is timed apart. Split into its parts, twice: as a worker
//          on the server's machine calls it (the job's Unix socket, tensors
//          through shared memory: rpc/shared_tensors.h), and as one on
//          another machine (TCP, tensors in the messages; no TLS here).
//          Alone (--only=ps) with the process settings of our servers and
//          workers (common/process_tuning.h).
//
// Every "bare"/"tensors" figure is samples/s over the timed window, which
// starts after --warmup minibatches (default 5, as the PyTorch peer does) and
// ends with the last minibatch. The loop's own time split (data, forward +
// backward, optimizer step) is printed beside it. --threads sets LibTorch's
// intra-op threads (Debian's LibTorch defaults to one). Machine-readable
// lines start with "RESULT ".
//
// --trace=FILE (bare) writes one line per timed minibatch of the last
// repetition: when it ended (seconds on CLOCK_MONOTONIC, shared by the
// processes of one machine), the milliseconds of its data and of its compute
// (forward, backward, step), and its samples; the window's opening is a line
// of 0 ms and 0 samples. bench/lockstep_limit.py reads the traces of two loops
// run side by side.
//
// The loops' LibTorch threads get a core each where a worker's would: where
// the process may run on exactly as many CPUs as --threads (2 or more), the
// loop binds its team as a worker whose pipeline keeps ahead does
// (worker/team_binding.h); --bind_team=false leaves them to the scheduler,
// as `elasticdl train --bind_workers=false` does. The output says which.
#include <ATen/Parallel.h>
#include <time.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/blas_kernels.h"
#include "common/process_tuning.h"
#include "elasticdl/data/dataset.h"
#include "elasticdl/zoo/optimizer.h"
#include "mnist_tasks.h"
#include "ps/parameter_store.h"
#include "ps/ps_service.h"
#include "rpc/grpc_util.h"
#include "rpc/ps_client.h"
#include "rpc/shared_tensors.h"
#include "worker/sharded_model.h"
#include "worker/team_binding.h"

namespace elasticdl::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Flags {
  std::string data;
  int threads = 2;
  int64_t records = 30000;
  int minibatch = 64;
  int minibatches_per_task = 8;
  int warmup = 5;
  int reps = 1;
  int ps_iters = 200;
  std::string only;
  std::string trace;
  bool bind_team = true;
};

// The jobs compared with the loops step synchronously: their tasks, cut as
// the master cuts them.
std::vector<Task> MakeTasks(const Flags& f) {
  return bench::MakeTasks(f.data, uint64_t(f.minibatch) * f.minibatches_per_task, f.records,
                          master::TaskSizes::kEven);
}

struct LoopResult {
  int64_t samples = 0;  // in the timed window
  double wall = 0, cpu = 0;
  double data = 0, compute = 0, step = 0;  // seconds in the window
  std::string team;                        // where its LibTorch threads ran
};

// Binds the calling thread's LibTorch team a core each where a worker would
// (see the top of the file); says where its threads run.
std::string BindTeam(const Flags& f, worker::TeamBinding* binding) {
  if (!f.bind_team) return "left to the scheduler (--bind_team=false)";
  if (f.threads < 2) return "one, left to the scheduler";
  if (!binding->available()) {
    return "left to the scheduler (the process may run on other than one CPU for each thread, or "
           "LibTorch runs them without libgomp)";
  }
  if (Status s = binding->Bind(); !s.ok()) Die(s);
  return "a core each";
}

// One training step as the worker does it, with a local optimizer.
double Step(const ZooProgram& program, Model& model, torch::optim::Optimizer& opt,
            const Example& batch, double* step_seconds) {
  model.zero_grad();
  torch::Tensor out = OrDie(program.Forward(model, batch.features, true));
  torch::Tensor loss = OrDie(program.Loss(batch.labels, out));
  loss.backward();
  double l = loss.item<double>();
  auto t = Clock::now();
  opt.step();
  *step_seconds += Seconds(Clock::now() - t);
  return l;
}

// The bare loop. `predecoded`: batches come from a vector filled before the
// clock starts (the compute-only limit).
LoopResult RunLoop(const Flags& f, const ZooProgram& program, bool predecoded) {
  std::shared_ptr<Model> model = OrDie(program.MakeModel());
  auto opt = OrDie(MakeOptimizer(OrDie(program.Optimizer()), model->parameters()));
  std::vector<Task> tasks = MakeTasks(f);

  auto batches_of = [&](const Task& t) {
    Dataset<Example> ds =
        OrDie(program.MakeDataset(ReadRecords(t.file, t.start, t.end), Mode::TRAINING));
    return ds.batch(f.minibatch);
  };
  std::vector<Example> decoded;
  if (predecoded) {
    for (const Task& t : tasks) {
      Dataset<Example> b = batches_of(t);
      while (auto x = OrDie(b.Next())) decoded.push_back(std::move(*x));
    }
  }

  LoopResult r;
  worker::TeamBinding binding(f.threads);
  r.team = BindTeam(f, &binding);
  int64_t n = 0;
  Clock::time_point start;
  double cpu0 = 0, data = 0, compute = 0, step = 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> trace(nullptr, &std::fclose);
  if (!f.trace.empty() && !predecoded) {
    trace.reset(std::fopen(f.trace.c_str(), "w"));
    if (trace == nullptr) Die(absl::InvalidArgumentError("--trace=" + f.trace + ": cannot write"));
  }
  auto account = [&](const Example& batch, double data_s) {
    auto t0 = Clock::now();
    double step_s = 0;
    Step(program, *model, *opt, batch, &step_s);
    auto t1 = Clock::now();
    double total = Seconds(t1 - t0);
    bool timed = n > f.warmup;
    if (n == f.warmup) {  // the window opens after the warm-up minibatches
      start = t1;
      cpu0 = ProcessCpuSeconds();
    } else if (timed) {
      r.samples += batch.labels.size(0);
      data += data_s;
      compute += total - step_s;
      step += step_s;
    }
    if (trace != nullptr && n >= f.warmup) {
      std::fprintf(trace.get(), "%.6f %.3f %.3f %lld\n", Seconds(t1.time_since_epoch()),
                   timed ? data_s * 1e3 : 0.0, timed ? total * 1e3 : 0.0,
                   timed ? (long long)batch.labels.size(0) : 0LL);
    }
    ++n;
  };
  if (predecoded) {
    for (const Example& b : decoded) account(b, 0);
  } else {
    for (const Task& t : tasks) {
      auto t0 = Clock::now();
      Dataset<Example> b = batches_of(t);
      while (true) {
        std::optional<Example> x = OrDie(b.Next());
        double data_s = Seconds(Clock::now() - t0);
        if (!x) break;
        account(*x, data_s);
        t0 = Clock::now();
      }
    }
  }
  r.wall = Seconds(Clock::now() - start);
  r.cpu = ProcessCpuSeconds() - cpu0;
  r.data = data;
  r.compute = compute;
  r.step = step;
  if (Status s = binding.Unbind(); !s.ok()) Die(s);
  return r;
}

void PrintLoop(const char* name, const Flags& f, const std::vector<LoopResult>& runs) {
  std::vector<double> rates;
  for (const LoopResult& r : runs) rates.push_back(r.samples / r.wall);
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  size_t best = std::max_element(rates.begin(), rates.end()) - rates.begin();
  const LoopResult& b = runs[best];
  double per = 1e3 / (b.samples / double(f.minibatch));  // ms per minibatch
  std::printf(
      "%-8s threads=%d  %7.1f samples/s (best of %zu; median %.1f)  per minibatch: data %.2f ms, "
      "forward+loss+backward %.2f ms, step %.2f ms; cpu %.0f%% of one core; threads: %s\n",
      name, f.threads, rates[best], runs.size(), sorted[sorted.size() / 2], b.data * per,
      b.compute * per, b.step * per, 100 * b.cpu / b.wall, b.team.c_str());
  std::printf("RESULT %s threads=%d samples_per_s=%.1f median=%.1f samples=%lld wall_s=%.2f\n",
              name, f.threads, rates[best], sorted[sorted.size() / 2], (long long)b.samples,
              b.wall);
  std::fflush(stdout);
}

// The parameter-server round trip of one minibatch, in-process: through a
// Unix socket and shared memory (`shared`), or over TCP with the tensors in
// the messages.
void RunPs(const Flags& f, const ZooProgram& program, bool shared) {
  ps::ParameterStoreOptions options;
  options.optimizer = OrDie(program.Optimizer());
  ps::ParameterStore store(options);
  rpc::JobCredentials credentials;
  std::string sockets;
  if (shared) {
    sockets = std::filesystem::temp_directory_path() / "train_bench-XXXXXX";
    if (::mkdtemp(sockets.data()) == nullptr) Die(absl::InternalError("mkdtemp failed"));
    credentials.socket_dir = sockets;  // made 0700, as a job's
  }
  ps::PsService service(&store, /*token=*/"", nullptr, "",
                        shared ? rpc::SharedTensorRegion::DefaultDir() : "");
  std::string address;
  auto server = OrDie(rpc::StartServer("127.0.0.1", 0, {&service}, &address, credentials));
  rpc::PsClient client({address}, credentials);
  worker::ShardedModel model(OrDie(program.MakeModel()), 1);
  {
    std::vector<proto::InitRequest> init(1);
    *init[0].mutable_values() = OrDie(model.Encode(0));
    std::vector<proto::InitResponse> out;
    if (Status s = client.Init(init, &out); !s.ok()) Die(s);
  }
  int64_t params = 0, bytes = 0;
  for (const auto& p : model.model().parameters()) params += p.numel();
  // Gradients as backward leaves them.
  {
    for (auto& p : model.model().parameters()) p.mutable_grad() = torch::randn_like(p) * 1e-3;
  }
  std::vector<double> pull_ms, fill_ms, push_ms;
  int64_t version = -1;
  auto apply = [&model](int, const proto::ModelValues& values, std::string_view in) {
    return model.Apply(values, in);
  };
  for (int i = 0; i < f.ps_iters + 10; ++i) {
    // The pull at the start of a task.
    auto t0 = Clock::now();
    std::vector<proto::PullRequest> pr(1);
    pr[0].set_known_version(version - 1);
    std::vector<proto::PullResponse> pulled;
    if (Status s = client.Pull(pr, &pulled); !s.ok()) Die(s);
    if (Status s = model.Apply(pulled[0].values()); !s.ok()) Die(s);
    version = pulled[0].values().version();
    // A minibatch within the task, as Worker::TrainMinibatch makes it.
    auto t1 = Clock::now();
    std::vector<proto::PushRequest> push(1);
    push[0].set_base_version(version);
    push[0].set_want_values(true);
    worker::ShardedModel::Held held;
    if (Status s = model.FillPush(0, &push[0], &held); !s.ok()) Die(s);
    bytes = 0;  // held where they lie, or copied in
    for (std::string_view b : held.bytes) bytes += static_cast<int64_t>(b.size());
    for (const auto* field : {&push[0].gradients(), &push[0].buffer_updates()}) {
      for (const proto::Tensor& t : *field) bytes += static_cast<int64_t>(t.content().size());
    }
    auto t2 = Clock::now();
    std::vector<proto::PushResponse> pushed;
    if (Status s = client.PushFrom(&push, &pushed, {}, {held.bytes}, apply); !s.ok()) Die(s);
    if (!pushed[0].has_values()) Die(absl::InternalError("the push was not answered with values"));
    version = pushed[0].values().version();
    auto t3 = Clock::now();
    if (i < 10) continue;  // warm-up
    pull_ms.push_back(Seconds(t1 - t0) * 1e3);
    fill_ms.push_back(Seconds(t2 - t1) * 1e3);
    push_ms.push_back(Seconds(t3 - t2) * 1e3);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double pull = median(pull_ms), fill = median(fill_ms), push = median(push_ms);
  const char* transport = shared ? "shared" : "message";
  std::printf(
      "ps       %s: %lld parameters, %.0f KB of gradients and buffer updates: per minibatch "
      "(median of %d) fill "
      "push %.2f ms + push (check, decode, SGD step, values back into the model) %.2f ms = %.2f "
      "ms; a task's first pull %.2f ms\n",
      shared ? "socket and shared memory" : "TCP, tensors in the messages", (long long)params,
      bytes / 1e3, f.ps_iters, fill, push, fill + push, pull);
  std::printf(
      "RESULT ps threads=%d transport=%s round_trip_ms=%.3f fill_ms=%.3f push_ms=%.3f "
      "task_pull_ms=%.3f\n",
      f.threads, transport, fill + push, fill, push, pull);
  server->Shutdown();
  if (!sockets.empty()) std::filesystem::remove_all(sockets);
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view name) -> const char* {
      return a.substr(0, name.size()) == name ? argv[i] + name.size() : nullptr;
    };
    if (const char* v = value("--data=")) {
      f.data = v;
    } else if (const char* v = value("--threads=")) {
      f.threads = std::atoi(v);
    } else if (const char* v = value("--records=")) {
      f.records = std::atoll(v);
    } else if (const char* v = value("--warmup=")) {
      f.warmup = std::atoi(v);
    } else if (const char* v = value("--reps=")) {
      f.reps = std::max(1, std::atoi(v));
    } else if (const char* v = value("--ps_iters=")) {
      f.ps_iters = std::max(1, std::atoi(v));
    } else if (const char* v = value("--only=")) {
      f.only = v;
    } else if (const char* v = value("--trace=")) {
      f.trace = v;
    } else if (const char* v = value("--bind_team=")) {
      if (std::string_view(v) != "true" && std::string_view(v) != "false") {
        std::fprintf(stderr, "--bind_team=%s: expected true or false\n", v);
        return 2;
      }
      f.bind_team = std::string_view(v) == "true";
    } else {
      std::fprintf(stderr,
                   "usage: train_bench --data=DIR [--threads=N] [--records=N] [--warmup=N] "
                   "[--reps=N] [--ps_iters=N] [--only=bare|tensors|ps] [--trace=FILE] "
                   "[--bind_team=true|false]\n");
      return 2;
    }
  }
  if (f.only == "ps") {
    // The round trip as our processes make it: each sets these at start.
    KeepFreedMemory();
    SkipLockCycleDetection();
  }
  torch::set_num_threads(std::max(f.threads, 1));
  ZooProgram program = MakeProgram();
  auto want = [&](std::string_view s) { return f.only.empty() || f.only == s; };
  if ((want("bare") || want("tensors")) && f.data.empty()) {
    Die(absl::InvalidArgumentError("--data=DIR (the train/ folder of `elasticdl data mnist`)"));
  }
  for (const char* name : {"bare", "tensors"}) {
    if (!want(name)) continue;
    std::vector<LoopResult> runs;
    for (int r = 0; r < f.reps; ++r) runs.push_back(RunLoop(f, program, name[0] == 't'));
    PrintLoop(name, f, runs);
  }
  if (want("ps")) {
    RunPs(f, program, /*shared=*/true);
    RunPs(f, program, /*shared=*/false);
  }
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
