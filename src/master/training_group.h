// The workers a synchronous step waits for (grads_to_wait = 0): a step of
// the parameter servers averages one gradient of every worker in the group.
//
// A worker joins when it is started before the job's first training task
// (so that the first steps of a job wait for every worker there when
// training begins, and runs that begin with the same workers are
// reproducible; JobState drops those not registered by then, which may
// still be pending on a busy cluster) and whenever it is handed a training
// task (so a
// replacement or an added worker is waited for only once it trains); it
// leaves when it is handed anything else
// (nothing to do, an evaluation task, a request to wait) and when it is
// gone. Every change makes a new generation; the master publishes the
// newest to the parameter servers (GroupPublisher), which ignore older ones.
//
// Not thread-safe: JobState guards it.
#ifndef ELASTICDL_MASTER_TRAINING_GROUP_H_
#define ELASTICDL_MASTER_TRAINING_GROUP_H_

#include <cstdint>
#include <set>
#include <vector>

#include "common/ids.h"

namespace elasticdl::master {

class TrainingGroup {
 public:
  // Generations start above `base`: a restarted master passes a base above
  // any generation its predecessors published.
  explicit TrainingGroup(int64_t base = 0) : generation_(base) {}

  void Join(WorkerId worker) { Set(worker, true); }
  void Leave(WorkerId worker) { Set(worker, false); }
  // Makes `worker` a member or not; a new generation only if that changes.
  void Set(WorkerId worker, bool member);

  int64_t generation() const { return generation_; }
  std::vector<WorkerId> members() const { return {members_.begin(), members_.end()}; }

 private:
  int64_t generation_;
  std::set<WorkerId> members_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_TRAINING_GROUP_H_
