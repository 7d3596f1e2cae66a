// How long a worker's calls to the parameter servers take: a decorator of
// ParameterServers that times Pull, PullRows and Push (a call to several
// shards counts once, from its start to its last answer; PushFrom's with
// the answer's values copied into the model) into histograms the worker
// reports with each task.
#ifndef ELASTICDL_WORKER_CALL_TIMINGS_H_
#define ELASTICDL_WORKER_CALL_TIMINGS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/histogram.h"
#include "worker/peers.h"

namespace elasticdl::worker {

// Histograms by call ("pull", "pull_rows", "push"). Thread-safe.
class CallTimings {
 public:
  void Record(const char* call, double seconds);
  // What was recorded since the last Take.
  std::map<std::string, Histogram> Take();

 private:
  std::mutex mu_;
  std::map<std::string, Histogram> by_call_;
};

// `servers`, its calls timed into `timings` (not owned; must outlive it).
std::unique_ptr<rpc::ParameterServers> TimedServers(std::unique_ptr<rpc::ParameterServers> servers,
                                                    CallTimings* timings);

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_CALL_TIMINGS_H_
