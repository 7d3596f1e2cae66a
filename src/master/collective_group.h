// AllreduceStrategy: the master as the rendezvous of the workers' collective
// group. The group is the workers that asked for a place (Rendezvous) and
// have not left or been lost, ranked by worker id. Every change makes a new
// version; members of an older version learn of it (heartbeats) and ask
// again. Each version has a key-value store, through which its members
// exchange the addresses of their Gloo connections (GroupStore), and a
// random secret, with which they check that every connection leads to a
// member.
//
// Versions start from the master's start time in microseconds, so that a
// restarted master's versions differ from every version its predecessor
// handed out; workers compare versions for equality only.
//
// Thread-safe. GET waits (up to the request's wait_ms, at most 2 s) without
// holding any lock of the caller.
#ifndef ELASTICDL_MASTER_COLLECTIVE_GROUP_H_
#define ELASTICDL_MASTER_COLLECTIVE_GROUP_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::master {

class CollectiveGroup {
 public:
  // Versions start above `base` (0: the time now, in microseconds).
  explicit CollectiveGroup(int64_t base = 0);

  // `worker`'s place in the newest version, making it a member first (a new
  // version) if it is not one. `failed_version`: the version whose group
  // the worker saw fail (0: none); when it is still the newest, a new
  // version is made with the same members, so that nobody reuses its store.
  Status Join(WorkerId worker, int64_t failed_version, proto::RendezvousResponse* place);
  // `worker` is no longer a member (left, lost): a new version if it was one.
  void Leave(WorkerId worker);

  // A store call of a member of `request.version()`; FAILED_PRECONDITION
  // when that version is not the newest or `worker` is not in it.
  Status Store(WorkerId worker, const proto::GroupStoreRequest& request,
               proto::GroupStoreResponse* response);

  int64_t version() const;
  std::vector<WorkerId> members() const;

 private:
  // A new version with the current members: a fresh store and secret.
  void NewVersionLocked();
  Status CheckMemberLocked(WorkerId worker, int64_t version) const;

  mutable std::mutex mu_;
  // Notified on every SET, ADD and new version.
  std::condition_variable changed_;
  int64_t version_;
  std::set<WorkerId> members_;
  std::string secret_;
  std::map<std::string, std::string> store_;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_COLLECTIVE_GROUP_H_
