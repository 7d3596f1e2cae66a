// Publishes the training group (TrainingGroup) to the parameter servers:
// called from the master's loop, it sends the newest generation to every
// server whenever the group or the servers' addresses changed (a relaunched
// server starts without a group), and tries again on the next call when a
// server does not answer.
#ifndef ELASTICDL_MASTER_GROUP_PUBLISHER_H_
#define ELASTICDL_MASTER_GROUP_PUBLISHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "master/job_state.h"
#include "rpc/parameter_servers.h"

namespace elasticdl::master {

class GroupPublisher {
 public:
  explicit GroupPublisher(rpc::ConnectParameterServers connect_ps)
      : connect_ps_(std::move(connect_ps)) {}

  // Sends the group if needed. Does nothing while a server is missing.
  void Tick(JobState* state);

 private:
  const rpc::ConnectParameterServers connect_ps_;
  std::vector<std::string> addresses_;
  std::unique_ptr<rpc::ParameterServers> client_;
  int64_t published_ = -1;
  bool warned_ = false;
};

}  // namespace elasticdl::master

#endif  // ELASTICDL_MASTER_GROUP_PUBLISHER_H_
