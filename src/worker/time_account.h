// Where a worker's time goes (proto::WorkerSeconds), for the job's goodput.
// The training loops say what each stretch of their time was; what they do
// not claim is time between tasks. Everything before the first task is
// start-up, counted from the process's start as the kernel recorded it, so
// that loading the zoo and LibTorch counts too. Thread-safe: the heartbeat
// thread reads the totals while the training thread adds.
#ifndef ELASTICDL_WORKER_TIME_ACCOUNT_H_
#define ELASTICDL_WORKER_TIME_ACCOUNT_H_

#include <chrono>
#include <mutex>
#include <optional>

#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::worker {

class TimeAccount {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Kind { kTrained, kStepWait, kDiscarded, kRecovery, kEvaluation };

  // Counts from `started` (ProcessStart() in a worker).
  explicit TimeAccount(Clock::time_point started);

  // When this process started, on the steady clock (now, when /proc does
  // not say).
  static Clock::time_point ProcessStart();

  // The first task arrived: start-up ends (once; later calls do nothing).
  void FirstTask();
  // `seconds` of the worker's time were `kind` (ignored before the first
  // task: start-up holds them). kTrained: one applied minibatch's seconds,
  // counted in minibatches (its pace tells the master of stragglers).
  void Add(Kind kind, double seconds);
  // Seconds from `since` until now, as Add.
  void AddSince(Kind kind, Clock::time_point since);

  // The running totals.
  proto::WorkerSeconds Totals() const;

 private:
  const Clock::time_point started_;
  mutable std::mutex mu_;
  std::optional<Clock::time_point> first_task_;
  proto::WorkerSeconds totals_;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_TIME_ACCOUNT_H_
