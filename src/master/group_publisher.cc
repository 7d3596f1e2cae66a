#include "master/group_publisher.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace elasticdl::master {

void GroupPublisher::Tick(JobState* state) {
  if (!state->all_ps_registered()) return;
  std::vector<std::string> addresses = state->ps_addresses();
  if (addresses != addresses_ || client_ == nullptr) {
    // A short deadline: a server that does not answer is tried again at the
    // next tick, and the loop keeps supervising meanwhile.
    client_ = connect_ps_(addresses, std::chrono::seconds(2));
    addresses_ = std::move(addresses);
    published_ = -1;
  }
  const TrainingGroup group = state->training_group();
  if (group.generation() == published_) return;
  proto::SetGroupRequest request;
  request.set_generation(group.generation());
  for (WorkerId worker : group.members()) request.add_workers(worker.value());
  Status s = client_->SetGroup(request);
  if (s.ok()) {
    published_ = request.generation();
    warned_ = false;
  } else if (!warned_) {
    warned_ = true;
    spdlog::warn("telling the parameter servers which workers train: {}; retrying",
                 std::string(s.message()));
  }
}

}  // namespace elasticdl::master
