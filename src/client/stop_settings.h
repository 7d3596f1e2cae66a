// The settings that end training early: --early_stopping's text form and its
// checks against the other settings.
#ifndef ELASTICDL_CLIENT_STOP_SETTINGS_H_
#define ELASTICDL_CLIENT_STOP_SETTINGS_H_

#include <string_view>

#include "elasticdl/api.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::client {

// "metric=accuracy,mode=max,patience=3,min_delta=0.001": metric and patience
// required, mode max (the default) or min, min_delta >= 0 (default 0).
// INVALID_ARGUMENT naming --early_stopping and the bad part.
StatusOr<proto::EarlyStopping> ParseEarlyStopping(std::string_view text);

// --early_stopping parses, and has the evaluations it watches: validation
// data and --evaluation_steps > 0.
Status CheckEarlyStopping(const JobArgs& args);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_STOP_SETTINGS_H_
