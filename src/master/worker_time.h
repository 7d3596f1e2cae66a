// The job's worker time (proto::WorkerSeconds, see job/worker_seconds.h):
// the latest totals each worker sent, and the sums of the workers gone. A
// lost worker's time since it was last heard from is counted as lost: what
// it computed then never reached anyone, and the lease ran out meanwhile.
// Stragglers: each worker's pace is the seconds per applied minibatch over
// its last kPaceWindow minibatches, its first kWarmUp left out (a new
// process's first forward sets LibTorch's kernels up); one whose pace is
// `factor` times the median of the others', and kMinLag behind it, is a
// straggler.
// Not thread-safe: JobState serializes calls.
#ifndef ELASTICDL_MASTER_WORKER_TIME_H_
#define ELASTICDL_MASTER_WORKER_TIME_H_

#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

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

  // Minibatches a pace is measured over (at least half as many), and those
  // a worker trains before its pace is followed.
  static constexpr int64_t kPaceWindow = 16;
  static constexpr int64_t kWarmUp = 4;
  struct Straggler {
    WorkerId worker;
    double pace = 0;    // seconds per applied minibatch
    double others = 0;  // the median of the other candidates' paces
  };
  // A straggler is also behind the others by this many seconds a minibatch:
  // at a few milliseconds a minibatch, a worker the machine schedules a
  // little later is several times slower, and replacing it costs seconds.
  static constexpr double kMinLag = 0.01;
  // The slowest of `candidates` whose pace is above `factor` times the
  // median of the other candidates' paces, and kMinLag above it, when two
  // or more others have one; nullopt if none is.
  std::optional<Straggler> FindStraggler(const std::vector<WorkerId>& candidates,
                                         double factor) const;
  // `worker`'s seconds per applied minibatch over its last kPaceWindow
  // minibatches; nullopt while it has not trained enough to tell.
  std::optional<double> PaceOf(WorkerId worker) const;

  // The sums of the workers gone, for the master's journal, and back.
  const proto::WorkerSeconds& gone() const { return gone_; }
  void RestoreGone(const proto::WorkerSeconds& gone) { gone_ = gone; }

 private:
  struct Heard {
    proto::WorkerSeconds seconds;
    Clock::time_point at;
    // (trained seconds, minibatches) as they grew, over about kPaceWindow
    // minibatches.
    std::deque<std::pair<double, int64_t>> trail;
  };
  // Seconds per applied minibatch over the trail; nullopt while it spans
  // fewer than kPaceWindow / 2 minibatches.
  static std::optional<double> Pace(const Heard& heard);
  std::map<WorkerId, Heard> running_;
  proto::WorkerSeconds gone_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_WORKER_TIME_H_
