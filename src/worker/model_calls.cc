#include "worker/model_calls.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace elasticdl::worker {
namespace {

uint64_t ThisThread() { return static_cast<uint64_t>(pthread_self()); }

}  // namespace

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

ModelCalls::Waiting::Waiting(Waiting&& other) noexcept
    : calls_(std::exchange(other.calls_, nullptr)) {}

ModelCalls::Waiting::~Waiting() {
  if (calls_ != nullptr) calls_->EndWait();
}

ModelCalls::Scope ModelCalls::Enter(const char* what, int64_t task, int64_t minibatch) {
  Call call;
  call.what = what;
  call.task = task;
  call.minibatch = minibatch;
  call.thread = ThisThread();
  call.since = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  call.id = next_id_++;
  calls_.emplace(call.id, call);
  return Scope(this, call.id);
}

void ModelCalls::Leave(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(id);
}

ModelCalls::Waiting ModelCalls::Wait() {
  const uint64_t thread = ThisThread();
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, call] : calls_) {
    if (call.thread == thread && call.waiting++ == 0) call.waiting_since = now;
  }
  return Waiting(this);
}

void ModelCalls::EndWait() {
  const uint64_t thread = ThisThread();
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, call] : calls_) {
    // A call entered while waiting did not wait: its count is 0.
    if (call.thread == thread && call.waiting > 0 && --call.waiting == 0) {
      call.since += now - call.waiting_since;
    }
  }
}

void ModelCalls::Shift(Clock::duration gap) {
  // A call entered since the process went on did not wait: none moves past
  // now.
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, call] : calls_) {
    call.since = std::min(call.since + gap, now);
    call.waiting_since = std::min(call.waiting_since + gap, now);
  }
}

std::optional<ModelCalls::Call> ModelCalls::Longest() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Call> longest;
  for (const auto& [id, call] : calls_) {
    if (call.waiting == 0 && (!longest || call.since < longest->since)) longest = call;
  }
  return longest;
}

bool ModelCalls::Overdue(uint64_t id, Clock::duration timeout) const {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(id);
  return it != calls_.end() && it->second.waiting == 0 && now - it->second.since >= timeout;
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
