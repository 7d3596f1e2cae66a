// AllreduceStrategy (and Local): a worker that holds the whole model and its
// optimizer, and trains in lockstep with the other workers of the
// collective group (worker/collective.h).
//
// A step: every member says what it brings (a header: its minibatch's task
// and index, or nothing; whether it leaves; whether it heard of a newer group
// version), and the headers are summed so that every member knows every
// other's. Members with a minibatch run forward and backward, reducing
// gradient buckets as backward produces them; members without one add
// zeros. The sum is divided by the number of minibatches, and every member
// applies the same optimizer step to the same values: their models stay
// identical, as do the minibatches of each task the model holds (`applied`,
// per task a prefix, as a parameter server keeps it).
//
// Exact-once: a minibatch counts once its step completed. A step that fails
// on some member (a peer died) is not applied there; when the group forms
// again, its members agree on the newest state any of them holds and the
// others take it (a broadcast), so a step applied anywhere is applied
// everywhere, and `applied` tells each member where its task goes on. The
// master counts work from the members' reports; when a group's state is
// older than what it counted (every member that held newer state is gone,
// or the state came from a checkpoint), the new group's rank 0 tells it and
// the master sets those tasks back (GroupState).
//
// Membership: a member that stops (SIGTERM, scale-down, the job is over)
// says so in a step's header and leaves after it; the others form a new
// version at once. A newer version (a worker joined, or the master lost one)
// is heard of through heartbeats; the member that hears it first says so in
// the next header and everybody regroups after that step. A member waiting
// in a collective gives up when a newer version appears, so a frozen peer
// costs its lease, not Gloo's timeout.
//
// Reproducibility: a sum over three or more members depends on which member
// brings which minibatch (floating-point addition is not associative; a
// sum of two is the same either way). So members that need a task at the
// same step take turns in rank order, each reporting its last task and
// asking for the next one in its turn: the master, which deals tasks in a
// seeded order, then deals them to the same ranks on every run. A member
// says in a step's header that its minibatch is its task's last (its
// pipeline is read two minibatches ahead), and the turns follow that step;
// at a version's first step, the members without a task take them.
//
// The next task, ahead: without turns (one or two members), a member asks
// for its next task as soon as its current task's pipeline has made its
// last minibatch (the pipeline runs ahead of the model on a thread of its
// own, when the pipelines are not Python code and were seen to leave
// LibTorch's global generator alone in a task's first pull, which is taken
// to hold for every task, as it is taken to hold for every minibatch of
// one), in the step of the current task's last minibatch at the latest,
// while that step's reduce is in flight. The master's answer, which waits
// for its journal, comes on a thread of its own; it is taken at the next
// step, or when the current task is reported, and the next task's pipeline
// then starts on the pipeline's thread: the records of the next task are
// read and shuffled while the current task's last minibatches are trained
// and it is reported, instead of after. The member holds both tasks
// meanwhile (its heartbeats name both); one that leaves first, or whose
// group comes to take turns, hands the next one back.
#include <arpa/inet.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include "common/crc.h"
#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/seed.h"
#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/optimizer.h"
#include "ps/checkpoint.h"
#include "ps/checkpoint_writer.h"
#include "ps/embedding_table.h"
#include "ps/shard_state.h"
#include "rpc/grpc_util.h"
#include "rpc/tensor_codec.h"
#include "worker/collective.h"
#include "worker/worker.h"
#include "zoo/embedding_spec.h"
#include "zoo/lr_schedule_config.h"

namespace elasticdl::worker {
namespace {

using std::chrono::milliseconds;

// Gradient buckets of about this many bytes (DDP's default is 25 MB; small
// models here reduce in one or two).
constexpr int64_t kBucketBytes = 4 << 20;

// How long a member whose job is over waits for the master to note that it
// left (a master whose job is done may be gone).
constexpr milliseconds kLeaveTimeout{2000};

// The header of a step: one row per member, summed over the group.
enum Column : int64_t {
  kPresent,  // 1: the member brings a minibatch
  kTask,     // its task and index
  kMinibatch,
  kLeaving,  // 1: the member leaves after this step
  kRegroup,  // 1: it heard of a newer group version
  kIdle,     // 1: it has no task
  kJobOver,  // 1: it leaves because the job is over
  kLast,     // 1: its minibatch is its task's last
  kAttempt,  // its task's attempt
  kColumns
};

// The local address that reaches `master_address` (host:port): where the
// other members reach this one.
std::string LocalAddressTowards(const std::string& master_address) {
  const size_t colon = master_address.rfind(':');
  std::string host = master_address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "0" : master_address.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return "127.0.0.1";
  }
  std::string address = "127.0.0.1";
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      const void* at =
          local.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, at, text, sizeof(text)) != nullptr) address = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

}  // namespace

class CollectiveTrainer {
 public:
  explicit CollectiveTrainer(Worker* worker) : w_(*worker) {}
  ~CollectiveTrainer() {
    group_.reset();
    for (const std::shared_ptr<MasterLink>& link : links_) link->Drain();
  }
  Status Run();

 private:
  // How a run of steps in one group version ended.
  enum class Outcome { kRegroup, kFailed, kLeave };

  // The task being trained: its pipeline, where it is, and its report.
  struct Current {
    proto::Task task;
    std::optional<Dataset<Example>> batches;
    int64_t position = 0;  // index of the next minibatch the pipeline yields
    // Minibatches taken from the pipeline and not yet applied, by index.
    std::map<int64_t, Example> ready;
    // How many minibatches the pipeline yields, once it has ended.
    std::optional<int64_t> end;
    // A prefetch's failure, for the step that needs its minibatch.
    Status error;
    proto::ReportTaskRequest report;
    // The pipeline runs on the worker's pipeline thread (Worker::Ahead):
    // `batches` is empty, the thread holds it. One task at most.
    bool ahead = false;
  };

  Status BuildModel();
  Status Rendezvous(int64_t failed_version, proto::RendezvousResponse* place);
  // Agrees on the group's state: the newest any member holds, or the
  // checkpoint or initial model when none holds any.
  Status Synchronize(bool* rewound);
  Status InitializeState(bool* from_checkpoint);
  StatusOr<ps::ShardSnapshot> Snapshot() const;
  StatusOr<std::string> EncodeState() const;
  // Loads a checkpoint's values and version, its optimizer state when
  // `everything` or when it carries over to this job's optimizer
  // (ps::SlotsCarryOver), and, when `everything`, its applied minibatches.
  Status LoadState(const proto::ShardCheckpoint& checkpoint, bool everything);
  // The steps of one group version, which this worker asked to join at
  // `asked` (logged with its first step).
  StatusOr<Outcome> Steps(std::chrono::steady_clock::time_point asked);
  // Gets a task when there is none: false when the worker leaves (asked
  // to stop, or the job is over).
  StatusOr<bool> EnsureTask();
  // The minibatch the current task brings to the next step (nullopt when
  // the task is done: it is reported and dropped).
  StatusOr<std::optional<int64_t>> NextMinibatch();
  // Turns (see the top of this file): whether members take turns at all;
  // waiting for this member's turn at the current step and passing it on
  // (false: the group failed meanwhile).
  bool TakesTurns() const { return group_->world_size() >= 3; }
  bool AwaitTurn();
  bool PassTurn(int to);
  // A request on the key of `rank`'s turn at this step.
  proto::GroupStoreRequest TurnRequest(proto::GroupStoreRequest::Op op, int rank) const;
  // How many minibatches past the one a step needs the pipeline is read:
  // two when the header must say whether that one is the task's last.
  int64_t ReadAhead() const { return TakesTurns() ? 2 : 1; }
  // Runs the current task's pipeline until minibatch `index` is ready or
  // the pipeline ends, dropping ready ones below `from` (applied). Every
  // minibatch is the same on every run of the pipeline (seeded from the job,
  // the task and its index), so one run ahead of a failed step is reused.
  Status Fill(int64_t from, int64_t index);
  Status ReportCurrent(bool stopped, const std::string& error = "", bool nonfinite = false);
  // Reports `c` with the minibatches of it the model holds (its pipeline
  // thread, if it has it, stops).
  Status Report(Current* c, bool stopped, const std::string& error = "", bool nonfinite = false);
  // A task handed out, not begun yet.
  Current Handed(const proto::Task& task) const;
  void StartTask(Current c);
  // Once the current task's pipeline has ended (its last minibatches are
  // ready): asks for the next task, and at a later call takes the answer
  // and starts its pipeline ahead, where it may (see the top of this file).
  // A failure to ask only leaves the next task to be asked for after the
  // report.
  void AskAhead();
  // Takes the answer to AskAhead's ask, if any, into next_ (waiting for it
  // with `wait`); true once taken.
  bool TakeAhead(bool wait);
  // Reports the task asked for ahead, if any, as stopped: this member
  // leaves, or the group's state went back.
  Status HandBackAhead();
  Status WriteFinalCheckpoint();
  bool Abandoned() const {
    return group_ != nullptr && w_.latest_group_version_.load() > group_->version();
  }

  Worker& w_;
  std::shared_ptr<Model> model_;
  std::vector<std::pair<std::string, torch::Tensor>> parameters_;
  // The links to the master client handed to the groups' connections.
  std::vector<std::shared_ptr<MasterLink>> links_;
  std::vector<std::pair<std::string, torch::Tensor>> buffers_;
  // How a step combines each buffer over its members, as the parameter
  // servers do: a running statistic of momentum, the mean of the members'
  // values; a cumulative one (BatchNorm without momentum), the mean over
  // every minibatch its counter counts; any other buffer (a counter) adds
  // up what each member's forward added.
  struct BufferStep {
    enum Kind { kSum, kMean, kCumulative } kind = kSum;
    size_t counter = 0;  // kCumulative: the index of its counter in buffers_
  };
  std::vector<BufferStep> buffer_steps_;
  // By buffer, its value when the step began (in doubles): what a counter's
  // forward added is counted from it, and a step not applied puts it back.
  std::vector<torch::Tensor> step_start_;
  OptimizerSpec optimizer_spec_ = torch::optim::SGDOptions(0.1);
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  LearningRateSchedule schedule_;
  double base_lr_ = 0;
  double learning_rate_ = 0;
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<CollectiveGroup> group_;
  std::unique_ptr<ps::CheckpointWriter> checkpoints_;

  bool has_state_ = false;
  // The members built the model from the job's seed and got different
  // values: its constructor is not deterministic.
  bool model_differs_ = false;
  int64_t version_ = 0;
  std::map<int64_t, int64_t> applied_;
  std::optional<Current> current_;
  // The next task, handed out ahead (AskAhead).
  std::optional<Current> next_;
  // The last first pull of a task's pipeline on this thread left LibTorch's
  // global generator alone, and the pipelines are not Python code.
  bool pipelines_free_ = false;
  bool leaving_ = false;  // leaves after the next step
  // Steps of this group version so far (the same count on every member).
  int64_t step_ = 0;
  // The ranks that take turns at the next step, in order.
  std::vector<int> turns_;
  bool job_over_ = false;  // the master said so
  // This member is the lowest of those the job is over for in its last step.
  bool writes_final_checkpoint_ = false;
};

Status Worker::RunCollective() { return CollectiveTrainer(this).Run(); }

Status CollectiveTrainer::BuildModel() {
  torch::manual_seed(job_seeds::InitialModel(w_.job_.seed));
  EDL_ASSIGN_OR_RETURN(model_, w_.program_.MakeModel());
  EDL_RETURN_IF_ERROR(CheckDenseModel(
      *model_, w_.job_.strategy == proto::LOCAL_STRATEGY ? "Local" : "AllreduceStrategy"));
  w_.model_ = std::make_unique<ShardedModel>(model_, 1);
  std::vector<torch::Tensor> trainable;
  for (const auto& item : model_->named_parameters()) {
    parameters_.emplace_back(item.key(), item.value());
    if (item.value().requires_grad()) trainable.push_back(item.value());
  }
  std::map<std::string, size_t> buffer_index;
  for (const auto& item : model_->named_buffers()) {
    buffer_index[item.key()] = buffers_.size();
    buffers_.emplace_back(item.key(), item.value());
    step_start_.push_back(torch::empty(item.value().sizes(), torch::kDouble));
    buffer_steps_.push_back({});
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const ShardedModel::BufferRole role = w_.model_->RoleOf(buffers_[i].first);
    if (role.kind == ShardedModel::BufferRole::kCumulativeStatistic) {
      buffer_steps_[i].kind = BufferStep::kCumulative;
      buffer_steps_[i].counter = buffer_index.at(role.counter);
    } else if (role.kind == ShardedModel::BufferRole::kRunningStatistic) {
      buffer_steps_[i].kind = BufferStep::kMean;
    }
  }
  EDL_ASSIGN_OR_RETURN(optimizer_spec_, ParseOptimizer(w_.job_.optimizer.SerializeAsString()));
  if (w_.job_.optimizer.has_lr_schedule()) {
    EDL_ASSIGN_OR_RETURN(schedule_, LrScheduleFromProto(w_.job_.optimizer.lr_schedule()));
  }
  base_lr_ = std::visit([](const auto& o) { return static_cast<double>(o.lr()); }, optimizer_spec_);
  EDL_ASSIGN_OR_RETURN(optimizer_, MakeOptimizer(optimizer_spec_, trainable));
  buckets_ = std::make_unique<GradientBuckets>(trainable, kBucketBytes);
  ps::CheckpointWriterOptions writer;
  writer.dir = w_.job_.checkpoint_dir;
  writer.keep_max = w_.job_.keep_checkpoint_max;
  writer.owner = StrCat("worker ", w_.options_.worker_id);
  checkpoints_ = std::make_unique<ps::CheckpointWriter>(writer);
  return absl::OkStatus();
}

Status CollectiveTrainer::Rendezvous(int64_t failed_version, proto::RendezvousResponse* place) {
  proto::RendezvousRequest request;
  request.set_worker_id(w_.options_.worker_id);
  request.set_failed_version(failed_version);
  return w_.CallMaster("joining the collective group", &MasterClient::Rendezvous, request, place);
}

StatusOr<ps::ShardSnapshot> CollectiveTrainer::Snapshot() const {
  ps::ShardSnapshot s;
  s.version = version_;
  s.optimizer = w_.job_.optimizer;
  s.applied = applied_;
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : parameters_) {
    ps::ParameterSnapshot& out = s.parameters[name];
    out.value = p.detach().clone();
    ps::ExportOptimizerState(optimizer_spec_, *optimizer_, p, &out);
  }
  for (const auto& [name, b] : buffers_) s.buffers[name] = b.detach().clone();
  return s;
}

StatusOr<std::string> CollectiveTrainer::EncodeState() const {
  EDL_ASSIGN_OR_RETURN(ps::ShardSnapshot snapshot, Snapshot());
  proto::ShardCheckpoint checkpoint;
  EDL_RETURN_IF_ERROR(ps::EncodeSnapshot(std::move(snapshot), &checkpoint));
  return checkpoint.SerializeAsString();
}

Status CollectiveTrainer::LoadState(const proto::ShardCheckpoint& checkpoint, bool everything) {
  std::map<std::string, const proto::ParameterState*> states;
  std::map<std::string, const proto::Tensor*> buffers;
  for (const proto::ParameterState& p : checkpoint.parameters()) states[p.value().name()] = &p;
  for (const proto::Tensor& b : checkpoint.buffers()) buffers[b.name()] = &b;
  const bool slots_apply =
      everything || ps::SlotsCarryOver(checkpoint.optimizer(), w_.job_.optimizer);
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : parameters_) {
    auto it = states.find(name);
    if (it == states.end()) {
      return absl::FailedPreconditionError(StrCat("the checkpoint (version ", checkpoint.version(),
                                                  ") has no parameter '", name, "' of the model"));
    }
    torch::Tensor target = p;
    EDL_RETURN_IF_ERROR(Annotate(rpc::CopyInto(it->second->value(), target), name));
    if (slots_apply) {
      EDL_ASSIGN_OR_RETURN(rpc::NamedTensors slots, rpc::DecodeTensors(it->second->slots()));
      EDL_RETURN_IF_ERROR(ps::ImportOptimizerState(optimizer_spec_, name, slots, it->second->step(),
                                                   p, optimizer_.get()));
    }
  }
  for (const auto& [name, b] : buffers_) {
    auto it = buffers.find(name);
    if (it == buffers.end()) continue;
    torch::Tensor target = b;
    EDL_RETURN_IF_ERROR(Annotate(rpc::CopyInto(*it->second, target), name));
  }
  version_ = checkpoint.version();
  if (everything) {
    applied_.clear();
    for (const proto::TaskProgress& t : checkpoint.applied())
      applied_[t.task_id()] = t.minibatches();
  }
  has_state_ = true;
  return absl::OkStatus();
}

Status CollectiveTrainer::InitializeState(bool* from_checkpoint) {
  *from_checkpoint = false;
  // This job's own checkpoints first: every worker was lost, and the group
  // goes on from the newest.
  StatusOr<proto::ShardCheckpoint> own = ps::ReadNewestCheckpoint(w_.job_.checkpoint_dir, 0, 1);
  if (own.ok()) {
    *from_checkpoint = true;
    spdlog::info("the collective group starts from this job's checkpoint of version {}",
                 own->version());
    return LoadState(*own, /*everything=*/true);
  }
  if (!absl::IsNotFound(own.status())) return own.status();
  if (!w_.job_.checkpoint_dir_for_init.empty()) {
    // A checkpoint to start from that does not load never will: no group
    // can start (FAILED_PRECONDITION).
    auto unusable = [&](const Status& s) {
      return absl::FailedPreconditionError(
          StrCat("--checkpoint_dir_for_init=", w_.job_.checkpoint_dir_for_init, ": ", s.message()));
    };
    StatusOr<std::vector<proto::ShardCheckpoint>> shards =
        ps::ReadNewestCompleteCheckpoint(w_.job_.checkpoint_dir_for_init);
    if (!shards.ok()) return unusable(shards.status());
    proto::ShardCheckpoint merged = (*shards)[0];
    for (size_t i = 1; i < shards->size(); ++i) {
      for (const auto& p : (*shards)[i].parameters()) *merged.add_parameters() = p;
      for (const auto& b : (*shards)[i].buffers()) *merged.add_buffers() = b;
    }
    if (Status loaded = LoadState(merged, /*everything=*/false); !loaded.ok()) {
      has_state_ = false;
      return unusable(loaded);
    }
    applied_.clear();
    return absl::OkStatus();
  }
  // The model as built from the job's seed (BuildModel).
  version_ = 0;
  applied_.clear();
  has_state_ = true;
  return absl::OkStatus();
}

Status CollectiveTrainer::Synchronize(bool* rewound) {
  *rewound = false;
  EDL_ASSIGN_OR_RETURN(auto states,
                       group_->AllGather({has_state_ ? 1 : 0, has_state_ ? version_ : -1}));
  int source = -1;
  int64_t newest = -1;
  bool all_there = true;
  for (int r = 0; r < group_->world_size(); ++r) {
    if (states[r][0] == 1 && states[r][1] > newest) {
      newest = states[r][1];
      source = r;
    }
  }
  for (int r = 0; r < group_->world_size(); ++r) {
    all_there = all_there && states[r][0] == 1 && states[r][1] == newest;
  }
  bool from_checkpoint = false;
  if (source < 0) {
    // Nobody holds a state: every member starts the same way, and checks
    // that they agree.
    if (Status initialized = InitializeState(&from_checkpoint); !initialized.ok()) {
      has_state_ = false;
      return initialized;
    }
    EDL_ASSIGN_OR_RETURN(std::string bytes, EncodeState());
    const int64_t fingerprint = crc::Crc32c(bytes);
    EDL_ASSIGN_OR_RETURN(auto fingerprints,
                         group_->AllGather({fingerprint, from_checkpoint ? 1 : 0}));
    bool all_from_seed = w_.job_.checkpoint_dir_for_init.empty();
    for (int r = 0; r < group_->world_size(); ++r) all_from_seed &= fingerprints[r][1] == 0;
    for (int r = 0; r < group_->world_size(); ++r) {
      if (fingerprints[r][0] == fingerprint) continue;
      // Every member built from the seed: the model differs for good, and
      // the worker ends without a state that a group formed later would
      // take as agreed. Read from checkpoints (by one member or more), the
      // members may have seen different versions: the next group takes the
      // newest.
      if (!all_from_seed) {
        return absl::FailedPreconditionError(StrCat(
            "the model's initial values differ between worker ranks ", group_->rank(), " and ", r,
            ", which started from different states (a checkpoint or the "
            "seed)"));
      }
      has_state_ = false;
      model_differs_ = true;
      return absl::FailedPreconditionError(StrCat(
          "the model's initial values differ between worker ranks ", group_->rank(), " and ", r,
          " although every worker built it from the job's seed: the model's constructor is "
          "not deterministic (it draws from a generator other than LibTorch's, or from the "
          "clock); AllreduceStrategy needs every worker to build the same model"));
    }
  } else if (!all_there) {
    std::string bytes;
    if (group_->rank() == source) {
      EDL_ASSIGN_OR_RETURN(bytes, EncodeState());
    }
    EDL_RETURN_IF_ERROR(group_->Broadcast(&bytes, source));
    if (group_->rank() != source && !(has_state_ && version_ == newest)) {
      proto::ShardCheckpoint state;
      if (!state.ParseFromString(bytes)) {
        return absl::DataLossError("the group's state arrived damaged");
      }
      EDL_RETURN_IF_ERROR(LoadState(state, /*everything=*/true));
      spdlog::info("took the collective group's state at model version {} from rank {}", version_,
                   source);
    }
  }
  // Rank 0 tells the master the state the group goes on from; when the
  // master sets work back, every member drops its task.
  int64_t reopened = 0;
  if (group_->rank() == 0) {
    proto::GroupStateRequest request;
    request.set_worker_id(w_.options_.worker_id);
    request.set_group_version(group_->version());
    request.set_model_version(version_);
    request.set_from_checkpoint(from_checkpoint);
    for (const auto& [task, minibatches] : applied_) {
      proto::TaskProgress* p = request.add_applied();
      p->set_task_id(task);
      p->set_minibatches(minibatches);
    }
    proto::GroupStateResponse response;
    EDL_RETURN_IF_ERROR(w_.CallMaster("telling the master the group's state",
                                      &MasterClient::GroupState, request, &response));
    reopened = response.reopened();
  }
  EDL_ASSIGN_OR_RETURN(auto told, group_->AllGather({reopened, current_ ? 1 : 0}));
  *rewound = told[0][0] > 0;
  // The first step's turns: the members without a task (every member, when
  // the master set work back).
  step_ = 0;
  turns_.clear();
  for (int r = 0; r < group_->world_size() && TakesTurns(); ++r) {
    if (*rewound || told[r][1] == 0) turns_.push_back(r);
  }
  return absl::OkStatus();
}

CollectiveTrainer::Current CollectiveTrainer::Handed(const proto::Task& task) const {
  Current c;
  c.task = task;
  c.report = w_.ReportOf(task);
  return c;
}

void CollectiveTrainer::StartTask(Current c) {
  w_.account_.FirstTask();
  w_.BeginTask(c.task);
  current_ = std::move(c);
}

void CollectiveTrainer::AskAhead() {
  if (TakeAhead(/*wait=*/false)) return;
  if (next_ || w_.AskedForNext() || TakesTurns() || !pipelines_free_ || !w_.asks_ahead_ ||
      leaving_ || job_over_ || w_.stopping() ||
      (w_.job_.max_steps > 0 && version_ + 1 >= w_.job_.max_steps)) {
    return;
  }
  w_.AskForNext(current_->task);
}

bool CollectiveTrainer::TakeAhead(bool wait) {
  std::optional<Worker::NextTask> handed;
  if (!w_.TakeNext(wait, &handed)) return false;
  if (!handed) return true;
  Current next = Handed(handed->task);
  if (handed->started) {
    // The current task's pipeline had ended: the thread is the next one's.
    if (current_) current_->ahead = false;
    next.ahead = true;
  }
  next_ = std::move(next);
  return true;
}

Status CollectiveTrainer::HandBackAhead() {
  TakeAhead(/*wait=*/true);
  if (!next_) return absl::OkStatus();
  Status s = Report(&*next_, /*stopped=*/true);
  next_.reset();
  w_.HoldAhead(nullptr);
  return s;
}

Status CollectiveTrainer::Report(Current* c, bool stopped, const std::string& error,
                                 bool nonfinite) {
  if (c->ahead) w_.Ahead().Stop();
  proto::ReportTaskRequest& report = c->report;
  auto it = applied_.find(c->task.task_id());
  report.set_minibatches_done(it == applied_.end() ? 0 : it->second);
  report.set_stopped(stopped);
  report.set_model_version(version_);
  report.set_learning_rate(learning_rate_);
  if (!error.empty()) report.set_error(error);
  report.set_nonfinite(nonfinite);
  return w_.Report(report);
}

Status CollectiveTrainer::ReportCurrent(bool stopped, const std::string& error, bool nonfinite) {
  // The next task's pipeline takes the thread before this one's report
  // would stop it.
  TakeAhead(/*wait=*/true);
  if (!current_) return absl::OkStatus();
  Status s = Report(&*current_, stopped, error, nonfinite);
  current_.reset();
  w_.EndTask();
  return s;
}

StatusOr<bool> CollectiveTrainer::EnsureTask() {
  while (!current_) {
    if (w_.lost_) return absl::AbortedError("the master took this worker as lost");
    if (w_.stopping() || job_over_) return false;
    TakeAhead(/*wait=*/true);
    std::optional<Current> handed = std::exchange(next_, std::nullopt);
    if (!handed) {
      proto::GetTaskRequest request;
      request.set_worker_id(w_.options_.worker_id);
      proto::GetTaskResponse response;
      EDL_RETURN_IF_ERROR(w_.CallMaster("asking the master for a task", &MasterClient::GetTask,
                                        request, &response));
      if (response.task().type() == proto::TASK_NONE) {
        job_over_ = true;
        return false;
      }
      if (response.task().type() == proto::TASK_WAIT) return true;
      handed = Handed(response.task());
    }
    const proto::Task task = handed->task;
    StartTask(std::move(*handed));
    w_.HoldAhead(nullptr);
    if (task.type() != proto::TASK_TRAINING) {
      // Evaluation on this member's model (the group's, at version_): the
      // others wait in the next step meanwhile.
      Status s = w_.RunTask(task, &current_->report);
      if (!s.ok()) current_->report.set_error(std::string(s.message()));
      EDL_RETURN_IF_ERROR(w_.Report(current_->report));
      current_.reset();
      w_.EndTask();
    }
  }
  return true;
}

Status CollectiveTrainer::Fill(int64_t from, int64_t index) {
  Current& c = *current_;
  c.ready.erase(c.ready.begin(), c.ready.lower_bound(from));
  if (c.ready.count(index) > 0 || (c.end && index >= *c.end)) return absl::OkStatus();
  if ((!c.batches && !c.ahead) || c.position > index) {
    if (c.ahead) w_.Ahead().Stop();
    c.ahead = false;
    EDL_ASSIGN_OR_RETURN(Dataset<Example> batches, w_.Batches(c.task, Mode::TRAINING));
    c.batches = std::move(batches);
    c.position = 0;
    c.end.reset();
    c.ready.clear();
  }
  // A pipeline ahead whose end is made gives up the rest of its minibatches
  // at once: the task's end is known, and the thread is free for the next
  // task's (AskAhead) while these are trained.
  while (c.position <= index || (c.ahead && w_.Ahead().EndMade())) {
    const ModelCalls::Scope call =
        w_.calls_.Enter(ModelCalls::kPipeline, c.task.task_id(), c.position);
    StatusOr<std::optional<Example>> batch = std::optional<Example>();
    if (c.ahead) {
      batch = w_.Ahead().Next();
    } else {
      torch::manual_seed(job_seeds::PipelinePull(w_.job_.seed, c.task.task_id(), c.position));
      if (c.position == 0) {
        batch = w_.ProbedPull(&*c.batches, &pipelines_free_);
        pipelines_free_ = pipelines_free_ && !w_.program_.MakesBatchesInPython();
      } else {
        batch = c.batches->Next();
      }
    }
    if (!batch.ok()) return w_.DatasetError(batch.status());
    if (!batch->has_value()) {
      c.end = c.position;
      return absl::OkStatus();
    }
    if (c.position >= from) c.ready.emplace(c.position, std::move(**batch));
    ++c.position;
  }
  return absl::OkStatus();
}

StatusOr<std::optional<int64_t>> CollectiveTrainer::NextMinibatch() {
  Current& c = *current_;
  EDL_RETURN_IF_ERROR(std::exchange(c.error, absl::OkStatus()));
  const int64_t want = applied_[c.task.task_id()];
  EDL_RETURN_IF_ERROR(Fill(want, want + ReadAhead() - 1));
  if (c.ready.count(want) == 0) return std::optional<int64_t>();
  return want;
}

// A turn is a key of the group version's store on the master,
// "turn/<step>/<rank>", set by the member before and deleted by the one
// whose turn it is. Errors (the version is over, the master is away) end
// the group's steps like a failed collective.
proto::GroupStoreRequest CollectiveTrainer::TurnRequest(proto::GroupStoreRequest::Op op,
                                                        int rank) const {
  proto::GroupStoreRequest request;
  request.set_worker_id(w_.options_.worker_id);
  request.set_version(group_->version());
  request.set_op(op);
  request.set_key(StrCat("turn/", step_, "/", rank));
  return request;
}

bool CollectiveTrainer::AwaitTurn() {
  proto::GroupStoreRequest request = TurnRequest(proto::GroupStoreRequest::GET, group_->rank());
  request.set_wait_ms(500);
  const auto give_up = std::chrono::steady_clock::now() + w_.job_.collective_timeout;
  while (true) {
    proto::GroupStoreResponse response;
    if (!w_.CallMaster("waiting for this worker's turn", &MasterClient::GroupStore, request,
                       &response)
             .ok()) {
      return false;
    }
    if (response.found()) break;
    // The member before is gone (a newer version), or stuck.
    if (Abandoned() || std::chrono::steady_clock::now() > give_up) return false;
  }
  proto::GroupStoreResponse ignored;
  return w_
      .CallMaster("taking this worker's turn", &MasterClient::GroupStore,
                  TurnRequest(proto::GroupStoreRequest::DELETE, group_->rank()), &ignored)
      .ok();
}

bool CollectiveTrainer::PassTurn(int to) {
  proto::GroupStoreResponse ignored;
  return w_
      .CallMaster("passing the turn on", &MasterClient::GroupStore,
                  TurnRequest(proto::GroupStoreRequest::SET, to), &ignored)
      .ok();
}

Status CollectiveTrainer::WriteFinalCheckpoint() {
  if (checkpoints_->last_written_version() == version_) return absl::OkStatus();
  std::error_code ignored;
  if (std::filesystem::exists(ps::CheckpointPath(w_.job_.checkpoint_dir, version_, 0, 1),
                              ignored)) {
    return absl::OkStatus();
  }
  EDL_ASSIGN_OR_RETURN(ps::ShardSnapshot snapshot, Snapshot());
  return checkpoints_->WriteNow(std::move(snapshot));
}

StatusOr<CollectiveTrainer::Outcome> CollectiveTrainer::Steps(
    std::chrono::steady_clock::time_point asked) {
  Model& model = *model_;
  bool stepped = false;
  while (true) {
    // This member's turn, when it has one: what it reports and asks the
    // master for until the turn passes on happens in rank order.
    const std::vector<int> turns = std::exchange(turns_, {});
    const auto turn = std::find(turns.begin(), turns.end(), group_->rank());
    if (turn != turns.end() && turn != turns.begin()) {
      if (!AwaitTurn()) return Outcome::kFailed;
    }
    // What this member brings. Asked to stop, nothing: it leaves after
    // this step, and the rest of its task goes back.
    bool staying = !w_.stopping();
    if (!staying && current_ && current_->end &&
        applied_[current_->task.task_id()] >= *current_->end) {
      // Asked to stop after its task's last minibatch: the task is done.
      EDL_RETURN_IF_ERROR(ReportCurrent(/*stopped=*/false));
    }
    if (staying) {
      EDL_ASSIGN_OR_RETURN(staying, EnsureTask());
    }
    std::optional<int64_t> minibatch;
    while (staying && current_) {
      if (w_.job_.max_steps > 0 && version_ >= w_.job_.max_steps) {
        spdlog::info("task {}: the model reached the job's max_steps ({})",
                     current_->task.task_id(), w_.job_.max_steps);
        EDL_RETURN_IF_ERROR(ReportCurrent(/*stopped=*/true));
        EDL_ASSIGN_OR_RETURN(staying, EnsureTask());
        continue;
      }
      StatusOr<std::optional<int64_t>> next = NextMinibatch();
      if (!next.ok()) {
        EDL_RETURN_IF_ERROR(ReportCurrent(false, std::string(next.status().message())));
      } else if (!next->has_value()) {
        EDL_RETURN_IF_ERROR(ReportCurrent(/*stopped=*/false));  // done
      } else {
        minibatch = **next;
        break;
      }
      EDL_ASSIGN_OR_RETURN(staying, EnsureTask());
    }
    leaving_ = !staying;
    if (turn != turns.end() && turn + 1 != turns.end() && !PassTurn(*(turn + 1))) {
      return Outcome::kFailed;
    }

    // Where the step's time goes (TimeAccount): computing this member's
    // minibatch, then waiting for the rest of the reduce.
    const auto step_began = TimeAccount::Clock::now();
    for (size_t i = 0; i < buffers_.size(); ++i) step_start_[i].copy_(buffers_[i].second);
    // A step that is not applied leaves the buffers as they were: every
    // member's forward moved its own.
    auto restore_buffers = [this] {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].second.copy_(step_start_[i]);
    };
    // Forward first: a non-finite loss withdraws the minibatch.
    torch::Tensor loss;
    double loss_value = 0;
    if (minibatch) {
      const Example& batch = current_->ready.at(*minibatch);
      model.train();
      torch::manual_seed(job_seeds::Minibatch(w_.job_.seed, current_->task.task_id(), *minibatch));
      const int64_t task = current_->task.task_id();
      StatusOr<torch::Tensor> outputs = w_.calls_.Run(ModelCalls::kForward, task, *minibatch, [&] {
        return w_.program_.Forward(model, batch.features, true);
      });
      StatusOr<torch::Tensor> computed =
          outputs.ok() ? w_.calls_.Run(ModelCalls::kLoss, task, *minibatch,
                                       [&] { return w_.program_.Loss(batch.labels, *outputs); })
                       : outputs.status();
      if (!computed.ok()) {
        EDL_RETURN_IF_ERROR(ReportCurrent(false, std::string(computed.status().message())));
        minibatch.reset();
      } else {
        loss = *computed;
        loss_value = loss.item<double>();
        if (!std::isfinite(loss_value)) {
          const std::optional<std::string> input = FirstNonFiniteInput(batch);
          const std::string error =
              input ? StrCat("minibatch ", *minibatch, " of task ", current_->task.task_id(),
                             " gave a non-finite loss (", loss_value, ") from its input: ", *input,
                             " holds a NaN or an infinity; it was left out of the step")
                    : StrCat("training diverged: minibatch ", *minibatch, " of task ",
                             current_->task.task_id(), " computed on model version ", version_,
                             " gave a non-finite loss (", loss_value,
                             "); it was left out of the step");
          EDL_RETURN_IF_ERROR(ReportCurrent(false, error, /*nonfinite=*/true));
          minibatch.reset();
        }
      }
    }

    // The header and the buffers go out now, and are reduced while backward
    // runs: every member learns what the others brought without a round
    // trip of its own.
    torch::Tensor header = torch::zeros({group_->world_size(), kColumns}, torch::kLong);
    {
      int64_t* row = header[group_->rank()].data_ptr<int64_t>();
      row[kPresent] = minibatch ? 1 : 0;
      if (minibatch) {
        row[kTask] = current_->task.task_id();
        row[kMinibatch] = *minibatch;
        row[kAttempt] = current_->task.attempt();
      }
      row[kLeaving] = leaving_ ? 1 : 0;
      row[kRegroup] = w_.latest_group_version_.load() > group_->version() ? 1 : 0;
      row[kIdle] = current_ ? 0 : 1;
      row[kJobOver] = leaving_ && job_over_ ? 1 : 0;
      row[kLast] = minibatch && current_->end && *minibatch + 1 >= *current_->end ? 1 : 0;
    }
    auto header_work = group_->StartAllReduce(header);
    // Backward reduces buckets as they fill; without a minibatch, zeros.
    buckets_->Begin(group_.get(), minibatch.has_value());
    if (minibatch) {
      try {
        const ModelCalls::Scope call =
            w_.calls_.Enter(ModelCalls::kBackward, current_->task.task_id(), *minibatch);
        loss.backward();
      } catch (const std::exception& e) {
        // Some buckets are out already: this step cannot be finished
        // honestly. Leaving fails it on every member, who redo it without
        // this one.
        return w_.program_.Annotate(
            absl::InvalidArgumentError(StrCat("backward failed: ", zoo_internal::ShortWhat(e))),
            EntryKind::kLoss);
      }
    }
    buckets_->LaunchRemaining();
    // Buffers, once backward ended (a Python model's forward may replace one,
    // which is copied into the tensor here at its end), and after every
    // bucket, in the same order on every member: running statistics of
    // momentum summed for their mean over the members that ran a forward,
    // like the gradients; the others by what each forward added (BufferStep).
    std::optional<torch::Tensor> flat_buffers;
    c10::intrusive_ptr<c10d::Work> buffers_work;
    if (!buffers_.empty()) {
      std::vector<torch::Tensor> parts;
      for (size_t i = 0; i < buffers_.size(); ++i) {
        const torch::Tensor& b = buffers_[i].second;
        if (!minibatch) {
          parts.push_back(torch::zeros({b.numel()}, torch::kDouble));
        } else if (buffer_steps_[i].kind == BufferStep::kMean) {
          parts.push_back(b.detach().to(torch::kDouble).reshape({-1}));
        } else {
          parts.push_back((b.detach().to(torch::kDouble) - step_start_[i]).reshape({-1}));
        }
      }
      flat_buffers = torch::cat(parts);
      buffers_work = group_->StartAllReduce(*flat_buffers);
    }

    // While the last buckets are reduced: the task's next minibatch.
    if (minibatch && current_) {
      Status prefetched = Fill(*minibatch, *minibatch + ReadAhead());
      if (!prefetched.ok()) current_->error = prefetched;
      if (prefetched.ok() && current_->end) AskAhead();
    }
    const auto computed = TimeAccount::Clock::now();
    std::optional<TimeAccount::Clock::time_point> reduced_at;
    // A step that is not applied with this member's minibatch in it was
    // computed for nothing; a member without one only waited. Applying the
    // step (after the reduce) is training.
    auto account_step = [&](bool applied) {
      using Seconds = std::chrono::duration<double>;
      const auto now = TimeAccount::Clock::now();
      const double computing = Seconds(computed - step_began).count();
      const double waiting = Seconds(reduced_at.value_or(now) - computed).count();
      const double applying = Seconds(now - reduced_at.value_or(now)).count();
      if (!minibatch) {
        w_.account_.Add(TimeAccount::Kind::kStepWait, computing + waiting + applying);
      } else if (!applied) {
        w_.account_.Add(TimeAccount::Kind::kDiscarded, computing + waiting + applying);
      } else {
        w_.account_.Add(TimeAccount::Kind::kTrained, computing + applying);
        w_.account_.Add(TimeAccount::Kind::kStepWait, waiting);
      }
    };
    if (!group_->Wait(header_work).ok()) {
      account_step(false);
      restore_buffers();
      return Outcome::kFailed;
    }
    int64_t count = 0;
    bool any_leaving = false, regroup = false, all_idle = true;
    // Two members bringing one minibatch (a task handed out twice, which
    // only a race with the master setting work back can make): the step is
    // dropped everywhere, and the member with the older attempt, which the
    // master took back, gives its task up (of equal ones, the higher rank).
    bool duplicate = false, mine_duplicates = false;
    // The job is over for these members: the first of them writes the
    // model's last checkpoint, which the master publishes.
    int first_over = -1;
    for (int r = 0; r < group_->world_size(); ++r) {
      const int64_t* h = header[r].data_ptr<int64_t>();
      any_leaving = any_leaving || h[kLeaving] == 1;
      regroup = regroup || h[kRegroup] == 1;
      all_idle = all_idle && h[kIdle] == 1;
      if (h[kJobOver] == 1 && first_over < 0) first_over = r;
      if (h[kLast] == 1 && TakesTurns()) turns_.push_back(r);
      if (h[kPresent] != 1) continue;
      ++count;
      for (int q = 0; q < r; ++q) {
        const int64_t* o = header[q].data_ptr<int64_t>();
        if (o[kPresent] == 1 && o[kTask] == h[kTask] && o[kMinibatch] == h[kMinibatch]) {
          duplicate = true;
          const int gives_up = o[kAttempt] < h[kAttempt] ? q : r;
          mine_duplicates = mine_duplicates || gives_up == group_->rank();
        }
      }
    }
    writes_final_checkpoint_ = first_over == group_->rank();
    ++step_;
    Status reduced = buckets_->Finish(count > 0 ? static_cast<double>(count) : 1.0);
    if (reduced.ok() && buffers_work) reduced = group_->Wait(buffers_work);
    if (!reduced.ok()) {
      account_step(false);
      restore_buffers();
      spdlog::warn("step on model version {} failed: {}", version_, std::string(reduced.message()));
      return Outcome::kFailed;
    }
    reduced_at = TimeAccount::Clock::now();
    if (duplicate) {
      spdlog::warn("step on model version {} dropped: two workers brought the same minibatch",
                   version_);
      if (mine_duplicates) EDL_RETURN_IF_ERROR(ReportCurrent(/*stopped=*/true));
      count = 0;
    }
    const bool mine_counts = minibatch.has_value() && !duplicate;
    const bool finite = count == 0 || buckets_->AllFinite();

    if (count > 0) {
      if (!finite) {
        // Every member sees the same sum: nobody applies it, and each one
        // that brought a minibatch fails its task (retried by the master).
        if (minibatch) {
          EDL_RETURN_IF_ERROR(
              ReportCurrent(false,
                            StrCat("training diverged: the gradients of the step on model version ",
                                   version_, " (minibatch ", *minibatch, " of this worker among ",
                                   count, ") hold non-finite values; the step was not applied"),
                            /*nonfinite=*/true));
        }
      } else {
        learning_rate_ = schedule_.LearningRate(base_lr_, version_);
        if (!schedule_.is_constant()) {
          for (auto& group : optimizer_->param_groups()) group.options().set_lr(learning_rate_);
        }
        try {
          optimizer_->step();
        } catch (const std::exception& e) {
          return absl::InternalError(StrCat("optimizer step failed: ", zoo_internal::ShortWhat(e)));
        }
        if (flat_buffers) {
          torch::NoGradGuard no_grad;
          int64_t at = 0;
          for (size_t i = 0; i < buffers_.size(); ++i) {
            torch::Tensor& b = buffers_[i].second;
            torch::Tensor sum = flat_buffers->narrow(0, at, b.numel()).view(b.sizes());
            switch (buffer_steps_[i].kind) {
              case BufferStep::kMean: {
                torch::Tensor mean = sum / static_cast<double>(count);
                b.copy_(b.is_floating_point() ? mean : mean.round());
                break;
              }
              case BufferStep::kCumulative: {
                // Each member's forward moved the mean by (x - mean) / (n + 1)
                // for its counter's n: over the step's `count` minibatches,
                // the mean over all n + count is the sum of those moves
                // times (n + 1) / (n + count).
                const double n = step_start_[buffer_steps_[i].counter].item<double>();
                b.copy_(step_start_[i] + sum * ((n + 1) / (n + static_cast<double>(count))));
                break;
              }
              case BufferStep::kSum:
                // Integers stay exact in doubles (to 2^53); narrower
                // than int64 they wrap, as a parameter server's add_
                // does. A bool takes the sets and clears, as a server.
                if (b.scalar_type() == torch::kBool) {
                  b.copy_((step_start_[i] + sum).clamp(0, 1));
                } else if (c10::isIntegralType(b.scalar_type(), /*includeBool=*/false)) {
                  b.copy_((step_start_[i] + sum).to(torch::kInt64));
                } else {
                  b.copy_(step_start_[i] + sum);
                }
                break;
            }
            at += b.numel();
          }
        }
        const int64_t before = minibatch ? applied_[current_->task.task_id()] : 0;
        for (int r = 0; r < group_->world_size(); ++r) {
          const int64_t* h = header[r].data_ptr<int64_t>();
          if (h[kPresent] != 1) continue;
          int64_t& done = applied_[h[kTask]];
          done = std::max(done, h[kMinibatch] + 1);
        }
        ++version_;
        if (!stepped) {
          stepped = true;
          spdlog::info(
              "collective group version {} ({} workers): first step, to model version {}, {} ms "
              "after asking to join",
              group_->version(), group_->world_size(), version_,
              std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - asked)
                  .count());
        }
        if (minibatch && current_) {
          Current& c = *current_;
          if (mine_counts) {
            c.report.set_loss_sum(c.report.loss_sum() + loss_value);
            c.report.set_minibatches(c.report.minibatches() + 1);
            c.report.set_records(c.report.records() + c.ready.at(*minibatch).labels.size(0));
          }
          c.ready.erase(*minibatch);
          // Heartbeats tell what every member has applied: up to the
          // step before this one.
          w_.minibatches_done_ = before;
        }
        if (group_->rank() == 0 && w_.job_.checkpoint_steps > 0 &&
            version_ % w_.job_.checkpoint_steps == 0) {
          EDL_ASSIGN_OR_RETURN(ps::ShardSnapshot snapshot, Snapshot());
          checkpoints_->Offer(std::move(snapshot));
        }
      }
    }
    account_step(mine_counts && finite);
    if (count == 0 || !finite) restore_buffers();

    if (leaving_) return Outcome::kLeave;
    if (first_over >= 0 && !current_) {
      // The master told a member the job is over (it hands out no task
      // again): an idle member leaves with it, rather than regroup with a
      // master that is ending.
      job_over_ = true;
      return Outcome::kLeave;
    }
    if (any_leaving || regroup) return Outcome::kRegroup;
    if (all_idle) std::this_thread::sleep_for(milliseconds(20));
  }
}

Status CollectiveTrainer::Run() {
  EDL_RETURN_IF_ERROR(w_.Register());
  EDL_RETURN_IF_ERROR(BuildModel());
  w_.heartbeat_ = std::thread(&Worker::HeartbeatLoop, &w_);
  const std::string host = LocalAddressTowards(w_.options_.master_address);
  int64_t failed_version = 0;
  // Since when this member has been forming a group rather than stepping:
  // recovery (start-up, before its first task).
  auto regrouping = TimeAccount::Clock::now();
  while (true) {
    if (w_.lost_) return absl::AbortedError("the master took this worker as lost");
    proto::RendezvousResponse place;
    const auto asked = std::chrono::steady_clock::now();
    EDL_RETURN_IF_ERROR(Rendezvous(failed_version, &place));
    if (place.world_size() == 0) {  // the job's first version is not formed yet
      if (w_.stopping()) return absl::OkStatus();
      std::this_thread::sleep_for(milliseconds(20));
      continue;
    }
    // Versions only grow: what heartbeats told before this one is older.
    int64_t seen = w_.latest_group_version_.load();
    while (place.version() > seen &&
           !w_.latest_group_version_.compare_exchange_weak(seen, place.version())) {
    }
    CollectiveGroup::Options options;
    options.host = host;
    options.timeout = w_.job_.collective_timeout;
    const int64_t version = place.version();
    options.abandoned = [this, version] { return w_.latest_group_version_.load() > version; };
    // A link of this version's own: cut if the connection is given up,
    // drained with the others before the master client may go (~CollectiveTrainer).
    links_.erase(
        std::remove_if(links_.begin(), links_.end(),
                       [](const std::shared_ptr<MasterLink>& l) { return l.use_count() == 1; }),
        links_.end());
    links_.push_back(std::make_shared<MasterLink>(w_.peers_.master.get()));
    StatusOr<std::unique_ptr<CollectiveGroup>> group =
        CollectiveGroup::Connect(links_.back(), w_.options_.worker_id, place, options);
    if (!group.ok()) {
      if (absl::IsPermissionDenied(group.status())) spdlog::error("{}", group.status().ToString());
      failed_version = version;
      std::this_thread::sleep_for(milliseconds(20));
      continue;
    }
    group_ = std::move(*group);
    spdlog::info("collective group version {}: rank {} of {}", version, group_->rank(),
                 group_->world_size());
    bool rewound = false;
    Status synced = Synchronize(&rewound);
    if (absl::IsFailedPrecondition(synced) && !has_state_) {
      if (model_differs_) {
        // No worker started in its place would build the same model: the
        // job ends, saying why.
        proto::RendezvousRequest request;
        request.set_worker_id(w_.options_.worker_id);
        request.set_leave(true);
        request.set_job_error(std::string(synced.message()));
        proto::RendezvousResponse ignored;
        w_.CallMaster("leaving the collective group", &MasterClient::Rendezvous, request, &ignored)
            .IgnoreError();
      }
      return synced;
    }
    if (!synced.ok()) {
      spdlog::warn("collective group version {}: {}", version, std::string(synced.message()));
      group_.reset();
      failed_version = version;
      continue;
    }
    if (rewound) {
      // The master took the tasks back; somebody redoes them from the
      // group's state.
      EDL_RETURN_IF_ERROR(ReportCurrent(/*stopped=*/true));
      EDL_RETURN_IF_ERROR(HandBackAhead());
    } else if (TakesTurns()) {
      // Tasks are dealt in turns from now on.
      EDL_RETURN_IF_ERROR(HandBackAhead());
    }
    w_.account_.AddSince(TimeAccount::Kind::kRecovery, regrouping);
    StatusOr<Outcome> outcome = Steps(asked);
    regrouping = TimeAccount::Clock::now();
    if (!outcome.ok()) {
      group_.reset();
      return outcome.status();
    }
    switch (*outcome) {
      case Outcome::kLeave: {
        EDL_RETURN_IF_ERROR(ReportCurrent(/*stopped=*/true));
        EDL_RETURN_IF_ERROR(HandBackAhead());
        if (writes_final_checkpoint_) EDL_RETURN_IF_ERROR(WriteFinalCheckpoint());
        checkpoints_->Flush();
        proto::RendezvousRequest request;
        request.set_worker_id(w_.options_.worker_id);
        request.set_leave(true);
        proto::RendezvousResponse ignored;
        if (job_over_) {
          // Once: the master may be gone already, its job done.
          w_.peers_.master->Rendezvous(request, &ignored, kLeaveTimeout).IgnoreError();
        } else {
          w_.CallMaster("leaving the collective group", &MasterClient::Rendezvous, request,
                        &ignored)
              .IgnoreError();
        }
        group_.reset();
        spdlog::info(job_over_ ? "the job is over" : "stopping as asked");
        return absl::OkStatus();
      }
      case Outcome::kRegroup:
        // Somebody leaves: this version is over. A newer version: take it.
        failed_version = w_.latest_group_version_.load() > version ? 0 : version;
        break;
      case Outcome::kFailed:
        failed_version = version;
        break;
    }
    group_.reset();
  }
}

}  // namespace elasticdl::worker
