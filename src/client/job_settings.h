// Every setting of `train`, `evaluate` and `predict`, declared once: its
// flags, the JobArgs member it binds, its help, the commands that take it
// and those that require it, and its range. The command line binds its
// flags from this table (cli/job_commands.cc); Train, Evaluate and Predict
// check a JobArgs against it, whether it came from a command line or a
// program, and turn it into the nested JobSpec the job's roles read.
#ifndef ELASTICDL_CLIENT_JOB_SETTINGS_H_
#define ELASTICDL_CLIENT_JOB_SETTINGS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "elasticdl/api.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::client {

enum class JobCommand { kTrain, kEvaluate, kPredict };

// Sets of commands, as bits.
inline constexpr unsigned kTrainCmd = 1;
inline constexpr unsigned kEvaluateCmd = 2;
inline constexpr unsigned kPredictCmd = 4;
inline constexpr unsigned kInferenceCmds = kEvaluateCmd | kPredictCmd;
inline constexpr unsigned kAllCmds = kTrainCmd | kInferenceCmds;

unsigned CommandBit(JobCommand command);

struct JobSetting {
  using Field =
      std::variant<std::string JobArgs::*, int64_t JobArgs::*, uint64_t JobArgs::*, bool JobArgs::*,
                   std::optional<int64_t> JobArgs::*, std::optional<uint64_t> JobArgs::*>;
  // The flag and its aliases as CLI11 spells them: "--dataset_fn,--input_fn";
  // "!--no_progress" for a switch that clears its bool.
  const char* flags;
  Field field;
  const char* help;
  // The commands that take it, and those that require it.
  unsigned commands = kAllCmds;
  unsigned required = 0;
  // Integers: the range allowed (most land in int32 fields of the spec).
  int64_t min = 0;
  int64_t max = std::numeric_limits<int32_t>::max();
  // Bools: a switch without a value (--detach) instead of an option that
  // takes true or false (--use_async=true).
  bool is_switch = false;
  // The section of --help it is listed in ("Data", "Cluster", ...).
  const char* group = "Options";
};

const std::vector<JobSetting>& JobSettings();

// "--minibatch_size" for "--minibatch_size"; "--dataset_fn" for
// "--dataset_fn,--input_fn"; "--no_progress" for "!--no_progress".
std::string FlagName(const JobSetting& setting);

// Checks every setting `command` takes (required ones given, numbers in
// range) and the combinations (--grads_to_wait with --use_async,
// --partition and --detach need --cluster=slurm, --master_addr is
// HOST:PORT, evaluate and predict name their model once). Errors name the
// flag and the value.
Status CheckJobArgs(const JobArgs& args, JobCommand command);

// The job spec of checked `args`, without the model and the job directory
// (the client fills those in once the zoo is built): relative paths made
// absolute, the update rule decided, the threads of each worker chosen
// (num_threads 0: the machine's cores divided among the workers).
StatusOr<proto::JobSpec> JobSpecOf(const JobArgs& args, JobCommand command);

// Kubernetes: every path the job's pods read or write (the job directory,
// data, outputs, checkpoints, a trained model) lies under a volume's
// mount_path; the error names the flag.
Status CheckPodPaths(const proto::JobSpec& spec);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_JOB_SETTINGS_H_
