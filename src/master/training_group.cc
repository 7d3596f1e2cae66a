#include "master/training_group.h"

namespace elasticdl::master {

void TrainingGroup::Set(WorkerId worker, bool member) {
  const bool changed = member ? members_.insert(worker).second : members_.erase(worker) > 0;
  if (changed) ++generation_;
}

}  // namespace elasticdl::master
