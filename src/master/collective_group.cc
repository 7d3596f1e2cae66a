#include "master/collective_group.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "common/secret.h"
#include "common/strings.h"

namespace elasticdl::master {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kMaxGetWait{2000};

int64_t MicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CollectiveGroup::CollectiveGroup(int64_t base) : version_(base != 0 ? base : MicrosNow()) {
  NewVersionLocked();
}

void CollectiveGroup::NewVersionLocked() {
  ++version_;
  store_.clear();
  StatusOr<std::string> secret = RandomHex(16);
  // getrandom does not fail on a running system; a version without a secret
  // would only weaken the members' check of each other, so fall back to
  // the version itself rather than fail the job.
  secret_ = secret.ok() ? *secret : StrCat("v", version_);
  changed_.notify_all();
}

Status CollectiveGroup::Join(WorkerId worker, int64_t failed_version,
                             proto::RendezvousResponse* place) {
  std::lock_guard<std::mutex> lock(mu_);
  if (members_.insert(worker).second || failed_version == version_) NewVersionLocked();
  place->set_version(version_);
  place->set_rank(static_cast<int32_t>(std::distance(members_.begin(), members_.find(worker))));
  place->set_world_size(static_cast<int32_t>(members_.size()));
  place->set_secret(secret_);
  return absl::OkStatus();
}

void CollectiveGroup::Leave(WorkerId worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (members_.erase(worker) > 0) NewVersionLocked();
}

int64_t CollectiveGroup::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::vector<WorkerId> CollectiveGroup::members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {members_.begin(), members_.end()};
}

Status CollectiveGroup::CheckMemberLocked(WorkerId worker, int64_t version) const {
  if (version != version_) {
    return absl::FailedPreconditionError(
        StrCat("collective group version ", version, " is over (now ", version_, ")"));
  }
  if (members_.count(worker) == 0) {
    return absl::FailedPreconditionError(
        StrCat("worker ", worker.value(), " is not in collective group version ", version));
  }
  return absl::OkStatus();
}

Status CollectiveGroup::Store(WorkerId worker, const proto::GroupStoreRequest& request,
                              proto::GroupStoreResponse* response) {
  std::unique_lock<std::mutex> lock(mu_);
  EDL_RETURN_IF_ERROR(CheckMemberLocked(worker, request.version()));
  switch (request.op()) {
    case proto::GroupStoreRequest::SET:
      store_[request.key()] = request.value();
      changed_.notify_all();
      return absl::OkStatus();
    case proto::GroupStoreRequest::GET: {
      const auto deadline = std::chrono::steady_clock::now() +
                            std::min(milliseconds(std::max(request.wait_ms(), 0)), kMaxGetWait);
      changed_.wait_until(lock, deadline, [&] {
        return version_ != request.version() || store_.count(request.key()) > 0;
      });
      EDL_RETURN_IF_ERROR(CheckMemberLocked(worker, request.version()));
      auto it = store_.find(request.key());
      response->set_found(it != store_.end());
      if (it != store_.end()) response->set_value(it->second);
      return absl::OkStatus();
    }
    case proto::GroupStoreRequest::ADD: {
      std::string& value = store_[request.key()];
      int64_t number = 0;
      if (!value.empty() && !absl::SimpleAtoi(value, &number)) {
        return absl::InvalidArgumentError(
            StrCat("group store key '", request.key(), "' does not hold a number"));
      }
      number += request.amount();
      value = std::to_string(number);
      response->set_number(number);
      changed_.notify_all();
      return absl::OkStatus();
    }
    case proto::GroupStoreRequest::CHECK:
      response->set_found(std::all_of(request.keys().begin(), request.keys().end(),
                                      [&](const std::string& k) { return store_.count(k) > 0; }));
      return absl::OkStatus();
    case proto::GroupStoreRequest::DELETE:
      response->set_found(store_.erase(request.key()) > 0);
      return absl::OkStatus();
    case proto::GroupStoreRequest::NUM_KEYS:
      response->set_number(static_cast<int64_t>(store_.size()));
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(StrCat("unknown group store call ", int(request.op())));
  }
}

}  // namespace elasticdl::master
