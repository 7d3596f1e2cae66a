// A core for each thread of a training thread's LibTorch team.
//
// Where a worker has exactly as many cores as intra-op threads, the
// scheduler still puts two of them on one core now and then: the team's
// other thread, woken for a parallel region while its own core runs a
// short burst of another thread (the pipeline's, a server's), lands on the
// training thread's core, and with both cores busy the scheduler does not
// look for a free one; it stays there for regions to come, the other core
// idle, the two taking turns. Bound, each thread keeps its core
// (docs/benchmark-notes.md, "Two computing threads on one core").
//
// LibTorch runs its parallel regions on libgomp's team of the thread that
// starts them; TeamBinding reaches the team's threads through libgomp
// itself (found at run time: nothing is bound where LibTorch uses another
// runtime). The training thread is bound to the core it runs on, the
// team's other threads to the others, in order. Threads started later by a
// bound thread start on all the process's cores, not on its one.
//
// One training thread creates and uses a TeamBinding.
#ifndef ELASTICDL_WORKER_TEAM_BINDING_H_
#define ELASTICDL_WORKER_TEAM_BINDING_H_

#include <sched.h>

#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::worker {

class TeamBinding {
 public:
  // For the calling thread's team of `threads` (LibTorch's intra-op
  // threads).
  explicit TeamBinding(int threads);

  // Whether Bind may bind: the team has two threads or more, libgomp is
  // there, and the process may run on exactly as many CPUs as the team has
  // threads (every core is this worker's; on a machine shared with others,
  // the scheduler's choice is left alone).
  bool available() const { return available_; }
  bool bound() const { return bound_; }

  // Binds the calling thread to the CPU it runs on and each other thread of
  // its team to one of the others. FAILED_PRECONDITION when !available().
  Status Bind();
  // Every thread of the team back on all the process's CPUs (nothing to do
  // unless bound).
  Status Unbind();

 private:
  // Runs a region of the team in which member i takes sets[i].
  Status Apply(const std::vector<cpu_set_t>& sets);
  // Every member's set: all the process's CPUs.
  std::vector<cpu_set_t> AllCpusEach() const;
  // Whether threads started later start on all the process's CPUs (true)
  // or on their creator's (false, the default).
  void StartThreadsOnAllCpus(bool on);

  const int threads_;
  const std::vector<int> cpus_;  // the process's, at construction
  bool available_ = false;
  bool bound_ = false;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_TEAM_BINDING_H_
