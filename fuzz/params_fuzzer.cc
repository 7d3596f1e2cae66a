// Fuzzes the --params syntax (elasticdl/zoo/params.h) and the --lr_schedule
// syntax (elasticdl/zoo/lr_schedule.h), both model-file facing texts.
//
// Input: the first byte picks the parser (even: params, odd: schedule), the
// rest is the text. A parse fails with INVALID_ARGUMENT, or its canonical
// text (Params::ToString, LearningRateSchedule::Describe) parses back to an
// equal value that prints the same.
#include <cstdint>
#include <string>

#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/params.h"
#include "fuzz_check.h"
#include "seed_mode.h"

namespace elasticdl::fuzz {
namespace {

Status WriteSeeds(const std::string& dir) {
  EDL_RETURN_IF_ERROR(
      WriteSeed(dir, "params",
                "\x00hidden_units=[10, 100, 20, 5], learning_rate=0.01, name=\"a,b\", "
                "flags=[true], ratios=[0.5, 2e-3], act='relu'"));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "cosine", "\x01warmup=100,cosine=2000,min_lr=0.0001"));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "step", "\x01step=300,gamma=0.5"));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "milestones", "\x01warmup=5,milestones=30:80:80,gamma=0.1"));
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "phases",
                                "\x01linear=5,start_factor=0.01;at=5,cosine=95,periodic=true;"
                                "at=100;at=120,polynomial=10,power=2"));
  return WriteSeed(dir, "exponential", "\x01exponential=1000,rate=0.96,staircase=true");
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    StatusOr<Params> params = Params::Parse(text);
    if (!params.ok()) {
      EDL_FUZZ_CHECK(params.status().code() == StatusCode::kInvalidArgument,
                     "Params::Parse: unexpected status {}", params.status().ToString());
      return 0;
    }
    const std::string canonical = params->ToString();
    StatusOr<Params> again = Params::Parse(canonical);
    EDL_FUZZ_CHECK(again.ok(), "the canonical text '{}' does not parse: {}", canonical,
                   again.status().ToString());
    EDL_FUZZ_CHECK(*again == *params, "'{}' parses to another map", canonical);
    EDL_FUZZ_CHECK(again->ToString() == canonical, "'{}' prints as '{}'", canonical,
                   again->ToString());
    return 0;
  }
  StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Parse(text);
  if (!schedule.ok()) {
    EDL_FUZZ_CHECK(schedule.status().code() == StatusCode::kInvalidArgument,
                   "LearningRateSchedule::Parse: unexpected status {}",
                   schedule.status().ToString());
    return 0;
  }
  const std::string described = schedule->Describe();
  StatusOr<LearningRateSchedule> again = LearningRateSchedule::Parse(described);
  EDL_FUZZ_CHECK(again.ok(), "Describe() '{}' does not parse: {}", described,
                 again.status().ToString());
  EDL_FUZZ_CHECK(*again == *schedule, "'{}' parses to another schedule", described);
  for (int64_t version : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{1} << 40}) {
    const double lr = schedule->LearningRate(0.1, version);
    EDL_FUZZ_CHECK(lr >= 0 && lr == lr, "learning rate {} at version {} of '{}'", lr, version,
                   described);
  }
  return 0;
}
