// The master under many workers: simulated workers, threads of this
// process, speak the real protocol to a running job's real master (and its
// parameter servers behind it) and do no model work: join, register, then
// get a task and report it done until the job has none left. Prints the
// task RPCs (GetTask answered with a task, ReportTask) per second while
// every worker was in, each call's p50 and p99 latency, and the longest
// pause in task hand-outs (a master killed and resumed meanwhile). Like a
// real worker, a simulated one retries a call its master did not answer
// (UNAVAILABLE: the master restarting). With --lose=K the first K workers
// are lost once they hold a task: they stop calling, and their tasks come
// back when their leases lapse. With --rate=R the workers together offer R
// task RPCs per second: each starts its get-and-report cycles 2N/R seconds
// apart (a worker's training between its calls), so that latency is
// measured below saturation; without it each calls again at once, and the
// figure is the master's capacity. bench/master_scale.sh and
// bench/master_big.sh start the job (--cluster=external) and run this.
//
// Usage: master_scale --job_dir=DIR --workers=N --minibatch_size=B [--lose=K] [--rate=R]
//        master_scale --write_records=N --output=FILE   (N one-byte records)
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/process_tuning.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/proto/elasticdl.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/job_credentials.h"

namespace {

using Clock = std::chrono::steady_clock;
using elasticdl::proto::Master;

struct Call {
  Clock::time_point end;
  double ms;
  bool report;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Writes `n` one-byte records as RecordIO: a data set as large as a job
// may index, for a master whose workers do no model work.
int WriteRecords(int64_t n, const std::string& path) {
  auto writer = elasticdl::RecordWriter::Create(path, elasticdl::RecordWriter::Options());
  elasticdl::Status s = writer.status();
  for (int64_t i = 0; s.ok() && i < n; ++i) s = (*writer)->Write("r");
  if (s.ok()) s = (*writer)->Close();
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

// Connections to the master, several, as workers on many hosts would have,
// shared by the simulated workers. As a worker's (worker/peers.cc), one
// whose calls fail as unreachable is replaced by a new one, at most every
// 500 ms, rather than waiting out gRPC's reconnect backoff.
class Channels {
 public:
  Channels(std::string address, elasticdl::rpc::JobCredentials credentials, int n)
      : address_(std::move(address)), credentials_(std::move(credentials)), stubs_(n), renewed_(n) {
    for (int i = 0; i < n; ++i) stubs_[i] = New(i);
  }
  std::shared_ptr<Master::Stub> Get(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    return stubs_[i % stubs_.size()];
  }
  void Renew(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t k = i % stubs_.size();
    if (Clock::now() - renewed_[k] < std::chrono::milliseconds(500)) return;
    renewed_[k] = Clock::now();
    stubs_[k] = New(static_cast<int>(k));
  }

 private:
  std::shared_ptr<Master::Stub> New(int i) const {
    // As every channel of a job (rpc::MakeChannel), each a connection of
    // its own.
    grpc::ChannelArguments args = elasticdl::rpc::ChannelArgumentsOf(credentials_);
    args.SetInt("elasticdl.bench.channel", i);
    return Master::NewStub(grpc::CreateCustomChannel(
        address_, elasticdl::rpc::ChannelCredentialsOf(credentials_), args));
  }

  const std::string address_;
  const elasticdl::rpc::JobCredentials credentials_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Master::Stub>> stubs_;
  std::vector<Clock::time_point> renewed_;
};

// Calls `call` on worker `index`'s connection until the master answers (a
// restarting master is UNAVAILABLE for a while), every 100 ms as a worker
// does, for up to two minutes; not once the job is over (its master gone).
template <typename Call>
grpc::Status Answered(Channels* channels, int index, Call call, std::atomic<int>* retries,
                      const std::atomic<bool>& over) {
  grpc::Status s;
  for (int i = 0; i < 1200; ++i) {
    s = call(*channels->Get(index));
    if ((s.error_code() != grpc::StatusCode::UNAVAILABLE &&
         s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) ||
        over) {
      return s;
    }
    ++*retries;
    channels->Renew(index);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return s;
}

std::string Flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind(prefix, 0) == 0)
      return std::string(argv[i]).substr(prefix.size());
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  // As every process of a job does (the workers simulated here included).
  elasticdl::SkipLockCycleDetection();
  if (const std::string n = Flag(argc, argv, "write_records", ""); !n.empty()) {
    return WriteRecords(std::atoll(n.c_str()), Flag(argc, argv, "output", ""));
  }
  const std::string job_dir = Flag(argc, argv, "job_dir", "");
  const int lose = std::atoi(Flag(argc, argv, "lose", "0").c_str());
  const int workers = std::atoi(Flag(argc, argv, "workers", "100").c_str());
  const int64_t minibatch = std::atoll(Flag(argc, argv, "minibatch_size", "64").c_str());
  const double rate = std::atof(Flag(argc, argv, "rate", "0").c_str());
  if (job_dir.empty() || workers <= 0 || minibatch <= 0 || rate < 0) {
    std::fprintf(stderr, "usage: master_scale --job_dir=DIR --workers=N --minibatch_size=B\n");
    return 2;
  }
  // The client writes the credentials, then starts the master, which writes its address.
  elasticdl::StatusOr<elasticdl::rpc::JobCredentials> credentials =
      absl::NotFoundError("no credentials yet");
  std::string address;
  for (int i = 0; i < 3000 && address.empty(); ++i) {
    if (!credentials.ok()) credentials = elasticdl::rpc::ReadJobCredentials(job_dir);
    auto a = elasticdl::ReadFileToString(job_dir + "/master.addr");
    if (credentials.ok() && a.ok()) address = *a;
    if (address.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (address.empty()) {
    std::fprintf(stderr, "no running master in %s after 5 minutes\n", job_dir.c_str());
    return 1;
  }
  Channels channels(address, *credentials, 16);
  std::atomic<int> registered{0};
  std::atomic<int64_t> records{0};
  std::atomic<int> errors{0};
  std::atomic<int> retries{0};
  std::atomic<int> duplicates{0};
  std::atomic<int> lost{0};
  // A worker was told there is nothing left: the master may be gone before
  // a paced worker calls again.
  std::atomic<bool> over{false};
  std::mutex mu;
  std::vector<Call> calls;
  Clock::time_point all_in{}, first_done{};
  bool done_seen = false;
  auto worker = [&](int index) {
    std::shared_ptr<Master::Stub> stub = channels.Get(index);
    Master::Stub& master = *stub;
    using elasticdl::rpc::MakeContext;
    using std::chrono::milliseconds;
    elasticdl::proto::JoinRequest join;
    join.set_host("bench");
    join.set_pid(getpid());
    elasticdl::proto::JoinResponse joined;
    if (!master.Join(MakeContext(milliseconds(60000), credentials->token).get(), join, &joined)
             .ok()) {
      ++errors;
      return;
    }
    const int id = joined.worker_id();
    elasticdl::proto::RegisterWorkerRequest reg;
    reg.set_worker_id(id);
    for (;;) {
      elasticdl::proto::RegisterWorkerResponse r;
      grpc::Status s = master.RegisterWorker(
          MakeContext(milliseconds(60000), credentials->token).get(), reg, &r);
      if (s.ok()) break;
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
        ++errors;
        return;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    if (++registered == workers) {
      std::lock_guard<std::mutex> lock(mu);
      all_in = Clock::now();
    }
    std::vector<Call> mine;
    int64_t version = 0;
    // --rate: this worker's cycles start `period` apart, the workers' first
    // ones spread over a period so that they do not call in step.
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(rate > 0 ? 2.0 * workers / rate : 0.0));
    Clock::time_point next_cycle = Clock::now() + period * (index % 1000) / 1000;
    for (;;) {
      if (rate > 0) {
        std::this_thread::sleep_until(next_cycle);
        next_cycle = std::max(next_cycle + period, Clock::now());
      }
      elasticdl::proto::GetTaskRequest get;
      get.set_worker_id(id);
      elasticdl::proto::GetTaskResponse got;
      Clock::time_point t0 = Clock::now();
      grpc::Status s = Answered(
          &channels, index,
          [&](Master::Stub& m) {
            return m.GetTask(MakeContext(milliseconds(60000), credentials->token).get(), get, &got);
          },
          &retries, over);
      Clock::time_point t1 = Clock::now();
      if (!s.ok()) {
        if (!over) ++errors;
        break;
      }
      const elasticdl::proto::Task& task = got.task();
      if (task.type() == elasticdl::proto::TASK_NONE) {
        over = true;
        break;
      }
      if (task.type() == elasticdl::proto::TASK_WAIT) {
        std::this_thread::sleep_for(milliseconds(20));
        continue;
      }
      mine.push_back({t1, std::chrono::duration<double, std::milli>(t1 - t0).count(), false});
      if (index < lose) {
        ++lost;  // holds its task and falls silent
        break;
      }
      const int64_t n = task.end() - task.start();
      elasticdl::proto::ReportTaskRequest report;
      report.set_worker_id(id);
      report.set_task_id(task.task_id());
      report.set_attempt(task.attempt());
      report.set_minibatches_done((n + minibatch - 1) / minibatch);
      report.set_minibatches((n + minibatch - 1) / minibatch);
      report.set_records(n);
      report.set_model_version(++version);
      elasticdl::proto::ReportTaskResponse ack;
      t0 = Clock::now();
      s = Answered(
          &channels, index,
          [&](Master::Stub& m) {
            return m.ReportTask(MakeContext(milliseconds(60000), credentials->token).get(), report,
                                &ack);
          },
          &retries, over);
      t1 = Clock::now();
      if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        // Reported to a master killed before its answer: the new one had it.
        ++duplicates;
        continue;
      }
      if (!s.ok()) {
        ++errors;
        break;
      }
      mine.push_back({t1, std::chrono::duration<double, std::milli>(t1 - t0).count(), true});
      records += n;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!done_seen && index >= lose) {
      done_seen = true;
      first_done = Clock::now();
    }
    calls.insert(calls.end(), mine.begin(), mine.end());
  };
  const Clock::time_point started = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (int i = 0; i < workers; ++i) threads.emplace_back(worker, i);
  for (std::thread& t : threads) t.join();

  // The window in which every worker was in and none had finished.
  std::vector<double> get_ms, report_ms;
  int64_t in_window = 0;
  for (const Call& c : calls) {
    if (c.end < all_in || c.end > first_done) continue;
    ++in_window;
    (c.report ? report_ms : get_ms).push_back(c.ms);
  }
  const double seconds = std::chrono::duration<double>(first_done - all_in).count();
  // The longest time no task was handed out, once every worker was in.
  std::vector<Clock::time_point> handed;
  for (const Call& c : calls) {
    if (!c.report && c.end >= all_in) handed.push_back(c.end);
  }
  std::sort(handed.begin(), handed.end());
  double longest_pause = 0;
  for (size_t i = 1; i < handed.size(); ++i) {
    longest_pause =
        std::max(longest_pause, std::chrono::duration<double>(handed[i] - handed[i - 1]).count());
  }
  std::printf(
      "workers=%d offered_rate=%s records=%lld task_rpcs=%zu errors=%d all_registered_in=%.2fs\n"
      "window=%.2fs (all %d workers in, none finished) task_rpcs_per_s=%.0f\n"
      "get_task  p50=%.2fms p99=%.2fms (%zu calls)\n"
      "report    p50=%.2fms p99=%.2fms (%zu calls)\n"
      "longest_pause_in_hand_outs=%.3fs retried_calls=%d duplicate_reports=%d lost_workers=%d\n",
      workers, rate > 0 ? std::to_string(static_cast<long long>(rate)).c_str() : "unpaced",
      static_cast<long long>(records.load()), calls.size(), errors.load(),
      std::chrono::duration<double>(all_in - started).count(), seconds, workers,
      seconds > 0 ? static_cast<double>(in_window) / seconds : 0.0, Percentile(get_ms, 0.5),
      Percentile(get_ms, 0.99), get_ms.size(), Percentile(report_ms, 0.5),
      Percentile(report_ms, 0.99), report_ms.size(), longest_pause, retries.load(),
      duplicates.load(), lost.load());
  return errors.load() == 0 ? 0 : 1;
}
