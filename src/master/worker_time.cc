#include "master/worker_time.h"

#include "job/worker_seconds.h"

namespace elasticdl::master {

void WorkerTime::Update(WorkerId worker, const proto::WorkerSeconds& seconds,
                        Clock::time_point now) {
  auto [it, added] = running_.try_emplace(worker, Heard{seconds, now});
  if (!added && seconds.held() >= it->second.seconds.held()) it->second = Heard{seconds, now};
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
