#include "common/process_tuning.h"

#include <absl/synchronization/mutex.h>
#include <malloc.h>

namespace elasticdl {

void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void SkipLockCycleDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace elasticdl
