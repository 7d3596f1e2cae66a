#include "master/worker_time.h"

#include <algorithm>

#include "job/worker_seconds.h"

namespace elasticdl::master {

void WorkerTime::Update(WorkerId worker, const proto::WorkerSeconds& seconds,
                        Clock::time_point now) {
  auto [it, added] = running_.try_emplace(worker, Heard{seconds, now, {}});
  Heard& heard = it->second;
  if (!added && seconds.held() < heard.seconds.held()) return;
  heard.seconds = seconds;
  heard.at = now;
  auto& trail = heard.trail;
  if (seconds.minibatches() >= kWarmUp &&
      (trail.empty() || seconds.minibatches() > trail.back().second)) {
    trail.emplace_back(seconds.trained(), seconds.minibatches());
  }
  while (trail.size() > 2 && trail.back().second - trail[1].second >= kPaceWindow) {
    trail.pop_front();
  }
}

std::optional<double> WorkerTime::Pace(const Heard& heard) {
  const auto& trail = heard.trail;
  if (trail.size() < 2) return std::nullopt;
  const int64_t minibatches = trail.back().second - trail.front().second;
  if (minibatches < kPaceWindow / 2) return std::nullopt;
  return (trail.back().first - trail.front().first) / static_cast<double>(minibatches);
}

std::optional<double> WorkerTime::PaceOf(WorkerId worker) const {
  auto it = running_.find(worker);
  if (it == running_.end()) return std::nullopt;
  return Pace(it->second);
}

std::optional<WorkerTime::Straggler> WorkerTime::FindStraggler(
    const std::vector<WorkerId>& candidates, double factor) const {
  std::vector<std::pair<double, WorkerId>> paces;
  for (WorkerId w : candidates) {
    if (std::optional<double> pace = PaceOf(w)) paces.emplace_back(*pace, w);
  }
  if (paces.size() < 3) return std::nullopt;
  std::sort(paces.begin(), paces.end());
  // The slowest against the median of the others.
  const auto& [pace, worker] = paces.back();
  const size_t n = paces.size() - 1;
  const double others =
      n % 2 == 1 ? paces[n / 2].first : (paces[n / 2 - 1].first + paces[n / 2].first) / 2;
  if (others <= 0 || pace <= factor * others || pace - others < kMinLag) return std::nullopt;
  return Straggler{worker, pace, others};
}

void WorkerTime::Gone(WorkerId worker, bool lost, Clock::time_point now) {
  auto it = running_.find(worker);
  if (it == running_.end()) return;
  proto::WorkerSeconds last = it->second.seconds;
  if (lost && now > it->second.at) {
    const double silent = std::chrono::duration<double>(now - it->second.at).count();
    last.set_held(last.held() + silent);
    last.set_lost(last.lost() + silent);
  }
  job::AddWorkerSeconds(last, &gone_);
  running_.erase(it);
}

proto::WorkerSeconds WorkerTime::Total() const {
  proto::WorkerSeconds total = gone_;
  for (const auto& [worker, heard] : running_) job::AddWorkerSeconds(heard.seconds, &total);
  return total;
}

}  // namespace elasticdl::master
