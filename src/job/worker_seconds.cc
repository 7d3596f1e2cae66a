#include "job/worker_seconds.h"

#include <fmt/format.h>

#include <algorithm>

namespace elasticdl::job {
namespace {

// The name of each part in DescribeWorkerSeconds.
const char* Wording(const char* part) {
  const std::string p = part;
  if (p == "startup") return "start-up";
  if (p == "step_wait") return "waiting for steps";
  if (p == "between_tasks") return "between tasks";
  return part;
}

}  // namespace

void AddWorkerSeconds(const proto::WorkerSeconds& more, proto::WorkerSeconds* total) {
  total->set_held(total->held() + more.held());
  total->set_startup(total->startup() + more.startup());
  total->set_trained(total->trained() + more.trained());
  total->set_step_wait(total->step_wait() + more.step_wait());
  total->set_discarded(total->discarded() + more.discarded());
  total->set_recovery(total->recovery() + more.recovery());
  total->set_evaluation(total->evaluation() + more.evaluation());
  total->set_lost(total->lost() + more.lost());
  total->set_minibatches(total->minibatches() + more.minibatches());
}

std::vector<std::pair<const char*, double>> WorkerSecondsParts(const proto::WorkerSeconds& s) {
  std::vector<std::pair<const char*, double>> parts = {{"startup", s.startup()},
                                                       {"trained", s.trained()},
                                                       {"step_wait", s.step_wait()},
                                                       {"discarded", s.discarded()},
                                                       {"recovery", s.recovery()},
                                                       {"evaluation", s.evaluation()},
                                                       {"lost", s.lost()}};
  double accounted = 0;
  for (const auto& [name, seconds] : parts) accounted += seconds;
  parts.emplace_back("between_tasks", std::max(0.0, s.held() - accounted));
  return parts;
}

double Goodput(const proto::WorkerSeconds& s) {
  return s.held() > 0 ? std::min(1.0, s.trained() / s.held()) : 0;
}

std::string DescribeWorkerSeconds(const proto::WorkerSeconds& s) {
  if (s.held() <= 0) return "";
  std::string parts;
  for (const auto& [name, seconds] : WorkerSecondsParts(s)) {
    const double share = 100 * seconds / s.held();
    if (std::string(name) == "trained" || share < 0.05) continue;
    parts += fmt::format("{}{} {:.1f}%", parts.empty() ? "" : ", ", Wording(name), share);
  }
  return fmt::format("goodput {:.1f}% of {:.1f} worker-seconds{}", 100 * Goodput(s), s.held(),
                     parts.empty() ? "" : fmt::format(" ({})", parts));
}

}  // namespace elasticdl::job
