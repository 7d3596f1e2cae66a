#include "worker/time_account.h"

#include <time.h>
#include <unistd.h>

#include "common/process_start.h"

namespace elasticdl::worker {
namespace {

double Seconds(TimeAccount::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Seconds since this process started: its start time (clock ticks after
// boot) against the boot-time clock it is measured on.
std::optional<double> ProcessAge() {
  StatusOr<uint64_t> ticks = ProcessStartTime(::getpid());
  if (!ticks.ok()) return std::nullopt;
  timespec now{};
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return std::nullopt;
  const double age = static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9 -
                     static_cast<double>(*ticks) / static_cast<double>(hz);
  if (age < 0) return std::nullopt;
  return age;
}

}  // namespace

TimeAccount::TimeAccount(Clock::time_point started) : started_(started) {}

TimeAccount::Clock::time_point TimeAccount::ProcessStart() {
  const Clock::time_point now = Clock::now();
  const std::optional<double> age = ProcessAge();
  if (!age) return now;
  return now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*age));
}

void TimeAccount::FirstTask() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_task_) first_task_ = Clock::now();
}

void TimeAccount::Add(Kind kind, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_task_ || seconds <= 0) return;
  proto::WorkerSeconds& t = totals_;
  switch (kind) {
    case Kind::kTrained:
      t.set_trained(t.trained() + seconds);
      t.set_minibatches(t.minibatches() + 1);
      break;
    case Kind::kStepWait:
      t.set_step_wait(t.step_wait() + seconds);
      break;
    case Kind::kDiscarded:
      t.set_discarded(t.discarded() + seconds);
      break;
    case Kind::kRecovery:
      t.set_recovery(t.recovery() + seconds);
      break;
    case Kind::kEvaluation:
      t.set_evaluation(t.evaluation() + seconds);
      break;
  }
}

void TimeAccount::AddSince(Kind kind, Clock::time_point since) {
  Add(kind, Seconds(Clock::now() - since));
}

proto::WorkerSeconds TimeAccount::Totals() const {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  proto::WorkerSeconds t = totals_;
  t.set_held(Seconds(now - started_));
  t.set_startup(Seconds(first_task_.value_or(now) - started_));
  return t;
}

}  // namespace elasticdl::worker
