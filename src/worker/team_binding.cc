#include "worker/team_binding.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>

#include "common/file.h"
#include "common/process_tuning.h"
#include "common/strings.h"

namespace elasticdl::worker {
namespace {

// libgomp's entry points: GOMP_parallel(fn, data, num_threads, flags) runs
// fn(data) on a team of num_threads, the caller first (the ABI GCC's
// `#pragma omp parallel` compiles to, and so LibTorch's regions).
using GompParallel = void (*)(void (*)(void*), void*, unsigned, unsigned);
using OmpGetThreadNum = int (*)();

struct Gomp {
  GompParallel parallel = nullptr;
  OmpGetThreadNum thread_num = nullptr;
};

// libgomp as loaded already (by LibTorch), or nothing.
const Gomp& Libgomp() {
  static const Gomp gomp = [] {
    Gomp g;
    void* handle = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (handle != nullptr) {
      g.parallel = reinterpret_cast<GompParallel>(dlsym(handle, "GOMP_parallel"));
      g.thread_num = reinterpret_cast<OmpGetThreadNum>(dlsym(handle, "omp_get_thread_num"));
    }
    return g;  // the handle stays open: the library was loaded before and stays
  }();
  return gomp;
}

cpu_set_t SetOf(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

struct Region {
  const std::vector<cpu_set_t>* sets;
  OmpGetThreadNum thread_num;
  std::atomic<int> members{0};
  std::atomic<int> error{0};  // the first errno of a member's binding
};

void BindMember(void* data) {
  auto* region = static_cast<Region*>(data);
  const auto i = static_cast<size_t>(region->thread_num());
  region->members.fetch_add(1);
  if (i >= region->sets->size()) return;
  if (sched_setaffinity(0, sizeof(cpu_set_t), &(*region->sets)[i]) != 0) {
    int expected = 0;
    region->error.compare_exchange_strong(expected, errno);
  }
}

}  // namespace

TeamBinding::TeamBinding(int threads) : threads_(threads), cpus_(AllowedCpus()) {
  const Gomp& gomp = Libgomp();
  available_ = threads_ >= 2 && gomp.parallel != nullptr && gomp.thread_num != nullptr &&
               static_cast<int>(cpus_.size()) == threads_;
}

Status TeamBinding::Apply(const std::vector<cpu_set_t>& sets) {
  Region region;
  region.sets = &sets;
  region.thread_num = Libgomp().thread_num;
  Libgomp().parallel(&BindMember, &region, static_cast<unsigned>(threads_), 0);
  if (region.error.load() != 0) {
    return ErrnoToStatus(region.error.load(), "binding LibTorch's threads to CPUs");
  }
  if (region.members.load() != threads_) {
    return absl::InternalError(StrCat("binding LibTorch's threads: a region of ", threads_,
                                      " threads ran on ", region.members.load()));
  }
  return absl::OkStatus();
}

void TeamBinding::StartThreadsOnAllCpus(bool on) {
  // pthread_create's default attributes (std::thread's): with a CPU set,
  // a new thread starts on it instead of taking its creator's.
  pthread_attr_t defaults;
  if (pthread_getattr_default_np(&defaults) != 0) return;
  cpu_set_t all = SetOf(cpus_);
  if (on) {
    pthread_attr_setaffinity_np(&defaults, sizeof(all), &all);
  } else {
    pthread_attr_setaffinity_np(&defaults, 0, nullptr);
  }
  pthread_setattr_default_np(&defaults);
  pthread_attr_destroy(&defaults);
}

Status TeamBinding::Bind() {
  if (!available_) {
    return absl::FailedPreconditionError(
        StrCat("no binding for a team of ", threads_, " threads on CPUs ", FormatCpuList(cpus_)));
  }
  const int here = sched_getcpu();
  std::vector<cpu_set_t> sets{SetOf({here})};
  for (int cpu : cpus_) {
    if (cpu != here) sets.push_back(SetOf({cpu}));
  }
  if (here < 0 || static_cast<int>(sets.size()) != threads_) {
    return absl::FailedPreconditionError(
        StrCat("the training thread runs on CPU ", here, ", not one of ", FormatCpuList(cpus_)));
  }
  // Threads the bound ones start from now on start on all the process's
  // CPUs (they would take their creator's one otherwise).
  StartThreadsOnAllCpus(true);
  Status s = Apply(sets);
  if (!s.ok()) {
    // Some members may have taken their CPU: all of them back on all.
    Apply(AllCpusEach()).IgnoreError();
    StartThreadsOnAllCpus(false);
    return s;
  }
  bound_ = true;
  return absl::OkStatus();
}

Status TeamBinding::Unbind() {
  if (!bound_) return absl::OkStatus();
  EDL_RETURN_IF_ERROR(Apply(AllCpusEach()));
  StartThreadsOnAllCpus(false);
  bound_ = false;
  return absl::OkStatus();
}

std::vector<cpu_set_t> TeamBinding::AllCpusEach() const {
  return std::vector<cpu_set_t>(static_cast<size_t>(threads_), SetOf(cpus_));
}

}  // namespace elasticdl::worker
