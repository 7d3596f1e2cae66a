// The job's worker time (proto::WorkerSeconds, see job/worker_seconds.h):
// the latest totals each worker sent, and the sums of the workers gone. A
// lost worker's time since it was last heard from is counted as lost: what
// it computed then never reached anyone, and the lease ran out meanwhile.
// Not thread-safe: JobState serializes calls.
#ifndef ELASTICDL_MASTER_WORKER_TIME_H_
#define ELASTICDL_MASTER_WORKER_TIME_H_

#include <map>

#include "common/clock.h"
#include "common/ids.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::master {

class WorkerTime {
 public:
  // `worker`'s running totals, heard at `now`. Totals that hold less time
  // than the ones kept (a reply overtaken by a later heartbeat) are ignored.
  void Update(WorkerId worker, const proto::WorkerSeconds& seconds, Clock::time_point now);
  // `worker` is gone: its totals join the sums of those gone. `lost`: it
  // did not end by itself, and its time from when it was last heard from
  // until `now` is added as lost.
  void Gone(WorkerId worker, bool lost, Clock::time_point now);
  // Every worker's time: those gone and the latest of those running.
  proto::WorkerSeconds Total() const;

  // The sums of the workers gone, for the master's journal, and back.
  const proto::WorkerSeconds& gone() const { return gone_; }
  void RestoreGone(const proto::WorkerSeconds& gone) { gone_ = gone; }

 private:
  struct Heard {
    proto::WorkerSeconds seconds;
    Clock::time_point at;
  };
  std::map<WorkerId, Heard> running_;
  proto::WorkerSeconds gone_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_WORKER_TIME_H_
