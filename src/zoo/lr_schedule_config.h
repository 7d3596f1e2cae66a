// How a LearningRateSchedule travels: in OptimizerConfig.lr_schedule of
// elasticdl.proto, from the client to the parameter servers.
#ifndef ELASTICDL_ZOO_LR_SCHEDULE_CONFIG_H_
#define ELASTICDL_ZOO_LR_SCHEDULE_CONFIG_H_

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/lr_schedule.h"

namespace elasticdl {

proto::LearningRateScheduleConfig LrScheduleToProto(const LearningRateSchedule& schedule);
// The schedule back, validated (INVALID_ARGUMENT as Validate()).
StatusOr<LearningRateSchedule> LrScheduleFromProto(const proto::LearningRateScheduleConfig& config);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_LR_SCHEDULE_CONFIG_H_
