#include "worker/collective.h"

#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/strings.h"
#include "rpc/tensor_codec.h"

namespace elasticdl::worker {
namespace {

using std::chrono::milliseconds;

// The master answers a GET after at most this long without the key, so
// that a waiting member notices its link cut.
constexpr milliseconds kGetPoll{500};
constexpr milliseconds kStoreCallTimeout{10000};

}  // namespace

MasterLink::MasterLink(MasterClient* master) : master_(master) {}

Status MasterLink::GroupStore(const proto::GroupStoreRequest& request,
                              proto::GroupStoreResponse* response, milliseconds timeout) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (cut_.load()) return absl::CancelledError("the group's connection was given up");
  return master_->GroupStore(request, response, timeout);
}

void MasterLink::Cut() { cut_.store(true); }

void MasterLink::Drain() {
  Cut();
  std::unique_lock<std::shared_mutex> lock(mu_);
}

namespace {

// c10d::Store over the master's GroupStore for one group version. Errors
// are thrown (c10d's convention); ProcessGroupGloo's constructor passes
// them on.
class MasterStore : public c10d::Store {
 public:
  MasterStore(std::shared_ptr<MasterLink> master, int32_t worker_id, int64_t version,
              milliseconds timeout)
      : master_(std::move(master)), worker_id_(worker_id), version_(version) {
    timeout_ = timeout;
  }

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    proto::GroupStoreRequest request = Request(proto::GroupStoreRequest::SET);
    request.set_key(key);
    request.set_value(std::string(value.begin(), value.end()));
    Call(request);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    const std::string value = WaitFor(key, timeout_);
    return {value.begin(), value.end()};
  }
  int64_t add(const std::string& key, int64_t amount) override {
    proto::GroupStoreRequest request = Request(proto::GroupStoreRequest::ADD);
    request.set_key(key);
    request.set_amount(amount);
    return Call(request).number();
  }
  bool deleteKey(const std::string& key) override {
    proto::GroupStoreRequest request = Request(proto::GroupStoreRequest::DELETE);
    request.set_key(key);
    return Call(request).found();
  }
  bool check(const std::vector<std::string>& keys) override {
    proto::GroupStoreRequest request = Request(proto::GroupStoreRequest::CHECK);
    for (const std::string& k : keys) request.add_keys(k);
    return Call(request).found();
  }
  int64_t getNumKeys() override {
    return Call(Request(proto::GroupStoreRequest::NUM_KEYS)).number();
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    for (const std::string& key : keys) WaitFor(key, timeout);
  }

 private:
  proto::GroupStoreRequest Request(proto::GroupStoreRequest::Op op) const {
    proto::GroupStoreRequest request;
    request.set_worker_id(worker_id_);
    request.set_version(version_);
    request.set_op(op);
    return request;
  }
  proto::GroupStoreResponse Call(const proto::GroupStoreRequest& request) {
    proto::GroupStoreResponse response;
    Status s = master_->GroupStore(request, &response, kStoreCallTimeout);
    if (!s.ok()) throw std::runtime_error(StrCat("group store: ", s.message()));
    return response;
  }
  std::string WaitFor(const std::string& key, milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    proto::GroupStoreRequest request = Request(proto::GroupStoreRequest::GET);
    request.set_key(key);
    request.set_wait_ms(static_cast<int32_t>(kGetPoll.count()));
    while (true) {
      proto::GroupStoreResponse response = Call(request);
      if (response.found()) return response.value();
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(StrCat("group store: timed out waiting for key '", key, "'"));
      }
    }
  }

  const std::shared_ptr<MasterLink> master_;
  const int32_t worker_id_;
  const int64_t version_;
};

// The SHA-256 digest of `data`, as raw bytes.
std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

// What member `from` sends member `to` to prove it knows `secret`.
std::string Proof(const std::string& secret, int64_t version, int from, int to) {
  return Sha256Hex(StrCat(secret, "|", version, "|", from, "|", to));
}

}  // namespace

StatusOr<std::unique_ptr<CollectiveGroup>> CollectiveGroup::Connect(
    std::shared_ptr<MasterLink> link, int32_t worker_id, const proto::RendezvousResponse& place,
    Options options) {
  // Gloo connects to every peer at the address the store gives and waits
  // up to its timeout for each; a peer that gave the version up meanwhile
  // never answers. So the connection is made on a thread of its own, and
  // given up (left to end on its own) when the version is abandoned; its
  // link is cut then, and its store's calls fail.
  auto store = c10::make_intrusive<MasterStore>(link, worker_id, place.version(), options.timeout);
  struct Connecting {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
    std::string error;
  };
  auto connecting = std::make_shared<Connecting>();
  std::thread([connecting, store, rank = place.rank(), world_size = place.world_size(),
               host = options.host, timeout = options.timeout] {
    c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
    std::string error;
    try {
      auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
      // Collectives run one after another on one thread: buckets are
      // reduced in the order they are started on every member.
      gloo->threads = 1;
      group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, gloo);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(connecting->mu);
    connecting->group = std::move(group);
    connecting->error = std::move(error);
    connecting->done = true;
    connecting->cv.notify_all();
  }).detach();
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  {
    std::unique_lock<std::mutex> lock(connecting->mu);
    while (!connecting->cv.wait_for(lock, milliseconds(20), [&] { return connecting->done; })) {
      if (options.abandoned && options.abandoned()) {
        link->Cut();
        return absl::UnavailableError(StrCat("connecting collective group version ",
                                             place.version(), ": abandoned (the group changed)"));
      }
    }
    if (!connecting->error.empty()) {
      return absl::UnavailableError(StrCat("connecting collective group version ", place.version(),
                                           " (rank ", place.rank(), " of ", place.world_size(),
                                           "): ", connecting->error));
    }
    group = std::move(connecting->group);
  }
  std::unique_ptr<CollectiveGroup> made(new CollectiveGroup(place.rank(), place.world_size(),
                                                            place.version(), std::move(options),
                                                            std::move(group), std::move(link)));
  EDL_RETURN_IF_ERROR(made->CheckConnections(place.secret()));
  return made;
}

CollectiveGroup::CollectiveGroup(int rank, int world_size, int64_t version, Options options,
                                 c10::intrusive_ptr<c10d::ProcessGroupGloo> group,
                                 std::shared_ptr<MasterLink> link)
    : rank_(rank),
      world_size_(world_size),
      version_(version),
      options_(std::move(options)),
      group_(std::move(group)),
      link_(std::move(link)) {}

CollectiveGroup::~CollectiveGroup() {
  link_->Cut();
  if (!broken_) return;
  // Its threads may be stuck in a collective until Gloo's timeout: let them
  // end on their own.
  std::thread([group = std::move(group_)]() mutable { group.reset(); }).detach();
}

c10::intrusive_ptr<c10d::Work> CollectiveGroup::StartAllReduce(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  return group_->allreduce(tensors);
}

Status CollectiveGroup::Wait(const c10::intrusive_ptr<c10d::Work>& work) {
  if (broken_) return absl::UnavailableError("the collective group failed before");
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  work->getFuture()->addCallback([done](c10::ivalue::Future&) {
    std::lock_guard<std::mutex> lock(done->mu);
    done->done = true;
    done->cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(done->mu);
    while (!done->cv.wait_for(lock, milliseconds(20), [&] { return done->done; })) {
      if (options_.abandoned && options_.abandoned()) {
        broken_ = true;
        return absl::CancelledError("collective abandoned: the group changed");
      }
    }
  }
  try {
    work->wait();
  } catch (const std::exception& e) {
    broken_ = true;
    return absl::UnavailableError(
        StrCat("collective of group version ", version_, " failed: ", e.what()));
  }
  return absl::OkStatus();
}

Status CollectiveGroup::AllReduce(at::Tensor& tensor) { return Wait(StartAllReduce(tensor)); }

StatusOr<std::vector<std::vector<int64_t>>> CollectiveGroup::AllGather(
    const std::vector<int64_t>& mine) {
  const int64_t n = static_cast<int64_t>(mine.size());
  // A sum over rows only this member fills: every member's values.
  at::Tensor all = at::zeros({world_size_, n}, at::kLong);
  std::memcpy(all[rank_].data_ptr<int64_t>(), mine.data(), n * sizeof(int64_t));
  EDL_RETURN_IF_ERROR(AllReduce(all));
  std::vector<std::vector<int64_t>> out(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    const int64_t* row = all[r].data_ptr<int64_t>();
    out[r].assign(row, row + n);
  }
  return out;
}

Status CollectiveGroup::Broadcast(std::string* bytes, int root) {
  at::Tensor size = at::zeros({1}, at::kLong);
  if (rank_ == root) size[0] = static_cast<int64_t>(bytes->size());
  std::vector<at::Tensor> sizes{size};
  EDL_RETURN_IF_ERROR(Wait(group_->broadcast(sizes, {root, 0})));
  const int64_t n = size[0].item<int64_t>();
  at::Tensor data = at::empty({std::max<int64_t>(n, 1)}, at::kByte);
  if (rank_ == root && n > 0) std::memcpy(data.data_ptr(), bytes->data(), n);
  std::vector<at::Tensor> datas{data};
  EDL_RETURN_IF_ERROR(Wait(group_->broadcast(datas, {root, 0})));
  if (rank_ != root) bytes->assign(static_cast<const char*>(data.data_ptr()), n);
  return absl::OkStatus();
}

Status CollectiveGroup::CheckConnections(const std::string& secret) {
  if (world_size_ == 1) return absl::OkStatus();
  constexpr int64_t kProof = SHA256_DIGEST_LENGTH;
  // All-to-all: member i's chunk j travels over the connection i-j.
  at::Tensor out = at::empty({world_size_ * kProof}, at::kByte);
  at::Tensor in = at::zeros({world_size_ * kProof}, at::kByte);
  for (int to = 0; to < world_size_; ++to) {
    std::memcpy(out.data_ptr<uint8_t>() + to * kProof, Proof(secret, version_, rank_, to).data(),
                kProof);
  }
  std::vector<int64_t> splits(world_size_, kProof);
  Status s = Wait(group_->alltoall_base(in, out, splits, splits));
  if (!s.ok()) return Annotate(s, "checking the collective group's connections");
  for (int from = 0; from < world_size_; ++from) {
    if (from == rank_) continue;
    const std::string expected = Proof(secret, version_, from, rank_);
    if (std::memcmp(in.data_ptr<uint8_t>() + from * kProof, expected.data(), kProof) != 0) {
      broken_ = true;
      return absl::PermissionDeniedError(
          StrCat("collective group version ", version_, ": the connection from rank ", from,
                 " does not come from a member of the group (wrong proof of the group's secret)"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- buckets

GradientBuckets::GradientBuckets(std::vector<at::Tensor> parameters, int64_t bucket_bytes) {
  std::reverse(parameters.begin(), parameters.end());
  slots_.resize(parameters.size());
  int64_t bucket_elements = 0;
  at::ScalarType bucket_type = at::kFloat;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const at::Tensor& p = parameters[i];
    const bool fits = !buckets_.empty() && p.scalar_type() == bucket_type &&
                      (bucket_elements + p.numel()) * p.element_size() <= bucket_bytes;
    if (!fits) {
      buckets_.emplace_back();
      bucket_elements = 0;
      bucket_type = p.scalar_type();
    }
    slots_[i].parameter = p;
    slots_[i].bucket = buckets_.size() - 1;
    slots_[i].offset = bucket_elements;
    buckets_.back().parameters.push_back(i);
    bucket_elements += p.numel();
    buckets_.back().gradient_elements = bucket_elements;
  }
  for (Bucket& b : buckets_) {
    const at::Tensor& first = slots_[b.parameters.front()].parameter;
    b.flat = at::zeros({b.gradient_elements + static_cast<int64_t>(b.parameters.size())},
                       first.options().requires_grad(false));
    for (size_t k = 0; k < b.parameters.size(); ++k) {
      slots_[b.parameters[k]].flag = b.gradient_elements + static_cast<int64_t>(k);
    }
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.parameter.requires_grad() || !slot.parameter.is_leaf()) {
      throw std::invalid_argument("gradient buckets take trainable leaf parameters");
    }
    slot.accumulator = torch::autograd::impl::grad_accumulator(slot.parameter);
    slot.hook =
        slot.accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list& /*inputs*/) {
              if (active_) OnGradient(i);
              return outputs;
            }));
  }
}

GradientBuckets::~GradientBuckets() {
  for (Slot& s : slots_) s.accumulator->del_post_hook(s.hook);
}

void GradientBuckets::Begin(CollectiveGroup* group, bool present) {
  group_ = group;
  active_ = present;
  launched_ = 0;
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.work.reset();
    b.flat.narrow(0, b.gradient_elements, static_cast<int64_t>(b.parameters.size())).zero_();
  }
  for (Slot& s : slots_) {
    s.filled = false;
    // Backward accumulates into no gradient of a previous step.
    s.parameter.mutable_grad() = at::Tensor();
  }
}

void GradientBuckets::OnGradient(size_t index) {
  Slot& slot = slots_[index];
  Bucket& bucket = buckets_[slot.bucket];
  const at::Tensor& grad = slot.parameter.grad();
  if (!grad.defined()) return;
  // The accumulated gradient: a parameter used twice in one forward is
  // accumulated once, its uses summed. Accumulated again once its bucket is
  // being reduced (a parameter used inside a reentrant checkpoint and out
  // of it), the sum would miss a use: the step fails instead.
  if (slot.filled && slot.bucket < launched_) {
    throw std::runtime_error(
        "a parameter's gradient was accumulated again after it was sent to the other "
        "workers (a parameter used both inside and outside a reentrant "
        "torch.utils.checkpoint; use_reentrant=False accumulates it once)");
  }
  bucket.flat.narrow(0, slot.offset, grad.numel()).copy_(grad.reshape({-1}));
  bucket.flat.narrow(0, slot.flag, 1).fill_(1);
  if (slot.filled) return;
  slot.filled = true;
  ++bucket.ready;
  LaunchReady();
}

void GradientBuckets::LaunchReady() {
  while (launched_ < buckets_.size() &&
         buckets_[launched_].ready == buckets_[launched_].parameters.size()) {
    Bucket& b = buckets_[launched_++];
    b.work = group_->StartAllReduce(b.flat);
  }
}

void GradientBuckets::LaunchRemaining() {
  active_ = false;
  // What backward did not reach (an absent member: everything) is zero.
  for (Slot& slot : slots_) {
    if (slot.filled) continue;
    Bucket& bucket = buckets_[slot.bucket];
    bucket.flat.narrow(0, slot.offset, slot.parameter.numel()).zero_();
    slot.filled = true;
    ++bucket.ready;
  }
  LaunchReady();
}

Status GradientBuckets::Finish(double divisor) {
  LaunchRemaining();
  Status failed;
  for (Bucket& b : buckets_) {
    Status s = group_->Wait(b.work);
    if (!s.ok() && failed.ok()) failed = s;
    if (!failed.ok()) break;
  }
  if (!failed.ok()) return failed;
  for (Bucket& b : buckets_) {
    if (divisor != 1) b.flat.narrow(0, 0, b.gradient_elements).div_(divisor);
  }
  for (const Bucket& b : buckets_) {
    const int64_t n = static_cast<int64_t>(b.parameters.size());
    const at::Tensor reached = b.flat.narrow(0, b.gradient_elements, n).to(at::kDouble);
    const double* flags = reached.data_ptr<double>();
    for (int64_t k = 0; k < n; ++k) {
      Slot& slot = slots_[b.parameters[static_cast<size_t>(k)]];
      if (flags[k] == 0) {
        slot.parameter.mutable_grad() = at::Tensor();  // reached on no member
        continue;
      }
      slot.parameter.mutable_grad() =
          b.flat.narrow(0, slot.offset, slot.parameter.numel()).view(slot.parameter.sizes());
    }
  }
  return absl::OkStatus();
}

bool GradientBuckets::AllFinite() const {
  for (const Bucket& b : buckets_) {
    if (!rpc::AllFinite(b.flat)) return false;
  }
  return true;
}

}  // namespace elasticdl::worker
