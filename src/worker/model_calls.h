// The calls into the model's code under way on a worker's threads: making
// a minibatch (reading its records through dataset_fn's pipeline), forward,
// the loss, backward, the metrics. A call that does not return (a loop that
// never ends, a lock never released, a read that waits forever) cannot be
// stopped, and while the worker's heartbeats go on from their own thread
// nothing else tells the master; the heartbeat thread finds it here
// (Longest) and ends the worker (Worker::EndStuck).
//
// Waiting for the servers, the master or the collective group is not a
// call: those waits have deadlines of their own, and a worker that waits for
// a stuck peer's step is not stuck itself. A wait inside a call (an
// Embedding layer's lookup of rows on the servers, in forward) stops the
// call's clock while it lasts (Wait).
//
// Thread-safe; a Scope and a Waiting belong to the thread that made them.
#ifndef ELASTICDL_WORKER_MODEL_CALLS_H_
#define ELASTICDL_WORKER_MODEL_CALLS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace elasticdl::worker {

class ModelCalls {
 public:
  using Clock = std::chrono::steady_clock;

  // The calls.
  static constexpr const char* kDatasetFn = "dataset_fn";  // making the task's pipeline
  static constexpr const char* kPipeline =                 // making a minibatch
      "the pipeline that reads the task's records through dataset_fn";
  static constexpr const char* kForward = "forward";
  static constexpr const char* kLoss = "the loss";
  static constexpr const char* kBackward = "backward";
  static constexpr const char* kEvalMetricsFn = "eval_metrics_fn";  // making the metrics
  static constexpr const char* kMetrics = "eval_metrics_fn's metrics";

  // What a call does (one of the above) and where in the job (task -1:
  // outside a task).
  struct Call {
    uint64_t id = 0;
    const char* what = "";
    int64_t task = -1;
    int64_t minibatch = -1;
    uint64_t thread = 0;  // pthread_self() of the calling thread
    // When it began, moved on by the time it waited (Wait) or the process
    // was stopped (Shift).
    Clock::time_point since;
    int waiting = 0;  // Waitings of its thread alive
    Clock::time_point waiting_since;

    // "forward (minibatch 3 of task 5)".
    std::string Describe() const;
  };

  // A call under way until destroyed.
  class [[nodiscard]] Scope {
   public:
    Scope(Scope&& other) noexcept;
    Scope& operator=(Scope&&) = delete;
    ~Scope();

   private:
    friend class ModelCalls;
    Scope(ModelCalls* calls, uint64_t id) : calls_(calls), id_(id) {}
    ModelCalls* calls_;
    uint64_t id_;
  };

  // The calls of the thread that made it wait, until destroyed: their time
  // does not run.
  class [[nodiscard]] Waiting {
   public:
    Waiting(Waiting&& other) noexcept;
    Waiting& operator=(Waiting&&) = delete;
    ~Waiting();

   private:
    friend class ModelCalls;
    explicit Waiting(ModelCalls* calls) : calls_(calls) {}
    ModelCalls* calls_;
  };

  // The calling thread calls `what` (one of the above, or another literal).
  Scope Enter(const char* what, int64_t task = -1, int64_t minibatch = -1);

  // fn(), as a call of `what`.
  template <typename F>
  auto Run(const char* what, int64_t task, int64_t minibatch, F&& fn) -> decltype(fn()) {
    const Scope call = Enter(what, task, minibatch);
    return fn();
  }

  // The calling thread's calls wait for something else (the servers).
  Waiting Wait();

  // The process was stopped for `gap` (SIGSTOP, a suspended Slurm job): no
  // call ran meanwhile. (A call entered since it went on starts now.)
  void Shift(Clock::duration gap);

  // The running call (not waiting) under way for the longest time; nullopt
  // when none is.
  std::optional<Call> Longest() const;
  // Whether the call `id` is still under way, running (not waiting), and
  // has run for `timeout`.
  bool Overdue(uint64_t id, Clock::duration timeout) const;
  // The threads in a call now.
  std::vector<uint64_t> Threads() const;

 private:
  void Leave(uint64_t id);
  void EndWait();

  mutable std::mutex mu_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Call> calls_;  // by id
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_MODEL_CALLS_H_
