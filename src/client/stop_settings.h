// The settings that end training early: --early_stopping's text form and its
// checks against the other settings, and the same settings declared by a
// trial's callbacks (seed 004).
#ifndef ELASTICDL_CLIENT_STOP_SETTINGS_H_
#define ELASTICDL_CLIENT_STOP_SETTINGS_H_

#include <cstdint>
#include <optional>
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

// What a trial's EarlyStopping and MaxStepsStopping callbacks declare.
struct DeclaredStopping {
  std::optional<proto::EarlyStopping> early_stopping;
  std::optional<int64_t> max_steps;
};

// Sets `tasks`' early stopping and max steps from `declared` where
// --early_stopping and --max_steps are not given (the flags win). Declared
// early stopping needs what the flag needs (validation data, evaluation
// steps): INVALID_ARGUMENT prefixed with `from`, which names the
// declaration ("mnist/mnist_trial.cc: MnistTrial: callbacks").
Status ApplyDeclaredStopping(const JobArgs& args, const DeclaredStopping& declared,
                             std::string_view from, proto::TaskSpec* tasks);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_STOP_SETTINGS_H_
