#include "client/stop_settings.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "common/strings.h"

namespace elasticdl::client {
namespace {

Status Bad(std::string_view text, std::string_view what) {
  return absl::InvalidArgumentError(StrCat("--early_stopping=", text, ": ", what));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

StatusOr<proto::EarlyStopping> ParseEarlyStopping(std::string_view text) {
  std::map<std::string, std::string, std::less<>> values;
  for (size_t at = 0; at <= text.size();) {
    size_t comma = text.find(',', at);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view part = Trim(text.substr(at, comma - at));
    at = comma + 1;
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) return Bad(text, StrCat("'", part, "': expected key=value"));
    std::string key(Trim(part.substr(0, eq)));
    if (key != "metric" && key != "mode" && key != "patience" && key != "min_delta") {
      return Bad(text,
                 StrCat("unknown key '", key, "' (expected metric, mode, patience, min_delta)"));
    }
    if (!values.emplace(key, Trim(part.substr(eq + 1))).second) {
      return Bad(text, StrCat("'", key, "' given twice"));
    }
  }
  proto::EarlyStopping e;
  auto metric = values.find("metric");
  if (metric == values.end() || metric->second.empty()) return Bad(text, "'metric' is required");
  e.set_metric(metric->second);
  e.set_maximize(true);
  if (auto mode = values.find("mode"); mode != values.end()) {
    if (mode->second != "max" && mode->second != "min") {
      return Bad(text, StrCat("'mode=", mode->second, "': expected max or min"));
    }
    e.set_maximize(mode->second == "max");
  }
  auto patience = values.find("patience");
  if (patience == values.end()) return Bad(text, "'patience' is required");
  {
    char* end = nullptr;
    const long long p = std::strtoll(patience->second.c_str(), &end, 10);  // NOLINT(runtime/int)
    if (patience->second.empty() || *end != '\0' || p < 1 || p > 1000000) {
      return Bad(text, StrCat("'patience=", patience->second, "': expected an integer >= 1"));
    }
    e.set_patience(static_cast<int32_t>(p));
  }
  if (auto delta = values.find("min_delta"); delta != values.end()) {
    char* end = nullptr;
    const double d = std::strtod(delta->second.c_str(), &end);
    if (delta->second.empty() || *end != '\0' || !(d >= 0) || !std::isfinite(d)) {
      return Bad(text, StrCat("'min_delta=", delta->second, "': expected a number >= 0"));
    }
    e.set_min_delta(d);
  }
  return e;
}

Status CheckEarlyStopping(const JobArgs& args) {
  if (args.early_stopping.empty()) return absl::OkStatus();
  EDL_RETURN_IF_ERROR(ParseEarlyStopping(args.early_stopping).status());
  if (args.validation_data.empty()) {
    return absl::InvalidArgumentError("--early_stopping needs --validation_data to evaluate on");
  }
  if (args.evaluation_steps <= 0) {
    return absl::InvalidArgumentError(
        "--early_stopping needs --evaluation_steps > 0: it watches the evaluations during "
        "training");
  }
  return absl::OkStatus();
}

Status ApplyDeclaredStopping(const JobArgs& args, const DeclaredStopping& declared,
                             std::string_view from, proto::TaskSpec* tasks) {
  if (declared.early_stopping && args.early_stopping.empty()) {
    if (args.validation_data.empty()) {
      return absl::InvalidArgumentError(
          StrCat(from, ": EarlyStopping needs --validation_data to evaluate on"));
    }
    if (args.evaluation_steps <= 0) {
      return absl::InvalidArgumentError(
          StrCat(from,
                 ": EarlyStopping needs --evaluation_steps > 0: it watches the evaluations "
                 "during training"));
    }
    *tasks->mutable_early_stopping() = *declared.early_stopping;
  }
  if (declared.max_steps && args.max_steps == 0) tasks->set_max_steps(*declared.max_steps);
  return absl::OkStatus();
}

}  // namespace elasticdl::client
