#include "common/aside_thread.h"

#include <pthread.h>

#include <cassert>
#include <utility>

namespace elasticdl {

AsideThread::AsideThread(std::string name) : name_(std::move(name)) {}

AsideThread::~AsideThread() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AsideThread::Start(std::function<void()> work) {
  assert(work);
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    // A thread that cannot be made throws here, leaving nothing given.
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    work_ = std::move(work);
    busy_ = true;
  }
  cv_.notify_all();
}

void AsideThread::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

void AsideThread::Loop() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || work_; });
    if (!work_) return;  // stopping, nothing left
    std::function<void()> work = std::exchange(work_, nullptr);
    lock.unlock();
    work();
    work = nullptr;  // what it holds goes before the lock is taken again
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace elasticdl
