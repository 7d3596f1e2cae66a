// AllreduceStrategy's collectives: one version of the workers' collective
// group as a c10d ProcessGroupGloo (the library PyTorch's DDP uses), and the
// buckets that reduce gradients while backward still runs.
//
// The group's connections are made through the master (MasterStore: the
// c10d::Store of the rendezvous is the master's GroupStore, over the job's
// authenticated channel), and checked: every member proves to every other,
// over their own Gloo connection, that it knows the version's secret, which
// only the master's channel carries. A connection from anyone else fails the
// check, and the group is not used.
//
// Failures: a peer that dies closes its connections and the collective in
// flight fails at once; a peer that neither answers nor closes them (frozen,
// cut off) is given up when the master makes a new version (the peer's
// lease lapsed) or, failing that, after the collective timeout. Waiting
// never blocks past `abandoned()` turning true. A group whose collective is
// stuck is destroyed on a thread of its own, so that its owner goes on at
// once.
#ifndef ELASTICDL_WORKER_COLLECTIVE_H_
#define ELASTICDL_WORKER_COLLECTIVE_H_

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"
#include "worker/peers.h"

namespace c10d {
class ProcessGroupGloo;
}  // namespace c10d

namespace elasticdl::worker {

// The master client a group's store calls (the rendezvous), shared with the
// thread that makes the group's connections, which may run on after its
// caller gave it up (until Gloo's timeout). Once cut, the store's calls fail
// at once; Drain also waits for a call under way, after which none reaches
// the client: whoever owns the client drains every link it handed out
// before the client goes.
class MasterLink {
 public:
  explicit MasterLink(MasterClient* master);
  Status GroupStore(const proto::GroupStoreRequest& request, proto::GroupStoreResponse* response,
                    std::chrono::milliseconds timeout);
  // Later calls fail; returns at once.
  void Cut();
  // Cut, and wait for a call under way.
  void Drain();

 private:
  std::shared_mutex mu_;  // held shared by each call, exclusively by Drain
  std::atomic<bool> cut_{false};
  MasterClient* const master_;
};

class CollectiveGroup {
 public:
  struct Options {
    // The host name or address the other members reach this one at.
    std::string host;
    // Gloo's own timeout, for a peer that stops answering.
    std::chrono::milliseconds timeout{60000};
    // Polled while waiting: true gives up (CANCELLED).
    std::function<bool()> abandoned;
  };

  // Connects to the other members of `place` through the master's store,
  // reached by `link` (which the caller drains before the master client
  // goes), UNAVAILABLE when the version is over or a member does not come,
  // and checks every connection with the version's secret.
  static StatusOr<std::unique_ptr<CollectiveGroup>> Connect(std::shared_ptr<MasterLink> link,
                                                            int32_t worker_id,
                                                            const proto::RendezvousResponse& place,
                                                            Options options);
  ~CollectiveGroup();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int64_t version() const { return version_; }

  // Starts a sum over the members of `tensor` (in place); Wait finishes it.
  c10::intrusive_ptr<c10d::Work> StartAllReduce(at::Tensor& tensor);
  // OK when the collective completed; UNAVAILABLE when a peer failed or it
  // timed out; CANCELLED when abandoned.
  Status Wait(const c10::intrusive_ptr<c10d::Work>& work);

  Status AllReduce(at::Tensor& tensor);
  // Every member's `mine` (int64, the same length on every member), by rank.
  StatusOr<std::vector<std::vector<int64_t>>> AllGather(const std::vector<int64_t>& mine);
  // Member `root`'s bytes to every member.
  Status Broadcast(std::string* bytes, int root);

 private:
  CollectiveGroup(int rank, int world_size, int64_t version, Options options,
                  c10::intrusive_ptr<c10d::ProcessGroupGloo> group,
                  std::shared_ptr<MasterLink> link);
  // Each member sends every other a proof of the secret over their
  // connection and checks the one it receives.
  Status CheckConnections(const std::string& secret);

  const int rank_;
  const int world_size_;
  const int64_t version_;
  const Options options_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  // The store's way to the master, cut when the group ends.
  const std::shared_ptr<MasterLink> link_;
  // A collective failed or was given up: the group is not used again, and
  // its destruction may wait for Gloo's timeout.
  bool broken_ = false;
};

// Gradient buckets (as DDP's Reducer): parameters in reverse order of
// registration (backward computes the last layers first), cut into buckets
// of about `bucket_bytes`. A parameter's gradient is copied into its bucket
// once backward has accumulated it (a hook after its AccumulateGrad node, so
// after the model's own tensor hooks: clipping, scaling), and a bucket whose
// gradients are all there is reduced at once, in bucket order on every
// member; Finish reduces the rest (zeros for parameters backward did not
// reach) and makes each parameter's gradient the reduced sum divided by
// `divisor`. A parameter backward reached on no member keeps no gradient,
// so that the optimizer leaves it as it is (no weight decay, no momentum),
// as PyTorch's optimizers skip a parameter whose grad is None: each bucket
// carries a flag per parameter, reduced with it, of whether it was reached.
class GradientBuckets {
 public:
  GradientBuckets(std::vector<at::Tensor> parameters, int64_t bucket_bytes);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // A step: its gradients go to `group`. A member without a minibatch
  // (`present` false) contributes zeros.
  void Begin(CollectiveGroup* group, bool present);
  // After backward: starts reducing the buckets not started yet (zeros for
  // parameters backward did not reach). Finish does it when not called.
  void LaunchRemaining();
  // After backward (or at once when not present): reduces what is left,
  // waits for every bucket, and sets each parameter's gradient (none for one
  // that no member's backward reached). Not OK when a collective failed
  // (the gradients are then this member's own, not to be applied).
  Status Finish(double divisor);
  // Whether every reduced gradient is finite (after Finish).
  bool AllFinite() const;
  int num_buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    // The parameters' gradients, then a flag for each (1: reached).
    at::Tensor flat;
    std::vector<size_t> parameters;  // indexes into slots_
    int64_t gradient_elements = 0;
    size_t ready = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };
  struct Slot {
    at::Tensor parameter;
    size_t bucket = 0;
    int64_t offset = 0;
    int64_t flag = 0;  // the offset of its flag in the bucket
    bool filled = false;
    // Held, as autograd holds a leaf's accumulator only while a graph uses
    // it: one made anew would not have the hook.
    std::shared_ptr<torch::autograd::Node> accumulator;
    uintptr_t hook = 0;
  };
  void OnGradient(size_t index);
  // Starts the buckets that are complete, in order.
  void LaunchReady();

  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  size_t launched_ = 0;
  CollectiveGroup* group_ = nullptr;
  bool active_ = false;
};

}  // namespace elasticdl::worker

#endif  // ELASTICDL_WORKER_COLLECTIVE_H_
