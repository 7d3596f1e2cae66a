#include "worker/model_calls.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace elasticdl::worker {

std::string ModelCalls::Call::Describe() const {
  if (task < 0) return what;
  if (minibatch < 0) return StrCat(what, " (task ", task, ")");
  return StrCat(what, " (minibatch ", minibatch, " of task ", task, ")");
}

ModelCalls::Scope::Scope(Scope&& other) noexcept
    : calls_(std::exchange(other.calls_, nullptr)), id_(other.id_) {}

ModelCalls::Scope::~Scope() {
  if (calls_ != nullptr) calls_->Leave(id_);
}

ModelCalls::Scope ModelCalls::Enter(const char* what, int64_t task, int64_t minibatch) {
  Call call{what, task, minibatch, static_cast<uint64_t>(pthread_self()), Clock::now()};
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  calls_.emplace(id, call);
  return Scope(this, id);
}

void ModelCalls::Leave(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(id);
}

std::optional<ModelCalls::Call> ModelCalls::Longest() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (calls_.empty()) return std::nullopt;
  return std::min_element(
             calls_.begin(), calls_.end(),
             [](const auto& a, const auto& b) { return a.second.since < b.second.since; })
      ->second;
}

std::vector<uint64_t> ModelCalls::Threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> threads;
  for (const auto& [id, call] : calls_) {
    if (std::find(threads.begin(), threads.end(), call.thread) == threads.end()) {
      threads.push_back(call.thread);
    }
  }
  return threads;
}

}  // namespace elasticdl::worker
