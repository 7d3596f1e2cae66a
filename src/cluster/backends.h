// Picks the job's cluster backend, once, from the kind the user chose
// (`--cluster=local|slurm|kubernetes|external`).
#ifndef ELASTICDL_CLUSTER_BACKENDS_H_
#define ELASTICDL_CLUSTER_BACKENDS_H_

#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_backend.h"
#include "common/environment.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::cluster {

// The cluster kinds, for flag checks and help.
const std::vector<std::string>& ClusterKinds();

struct BackendConfig {
  // "local", "slurm", "kubernetes" or "external".
  std::string kind = "local";
  // The elasticdl binary; empty: ElasticdlBinary() (common/file.h).
  std::string binary;
  std::string job_dir;
  std::string job_name;
  // host:port of the master (empty for the client, which starts it).
  std::string master_address;
  // Slurm: the partition; empty: the cluster's default.
  std::string partition;
  // Slurm: the workers' partition; empty: `partition`.
  std::string worker_partition;
  // The master runs with no client to start it again should it be lost
  // (`--detach`): Slurm requeues it instead.
  bool detached_master = false;
  // Kubernetes: the pods' shape. The API server and credentials come from
  // `environment` ($KUBECONFIG, the pod's service account, ~/.kube/config).
  proto::KubernetesSpec kubernetes;
  // The starter's environment (also: whether the user chose an
  // OMP_WAIT_POLICY for the job's local processes).
  Environment environment;
  // LibTorch threads of each worker (the CPUs it asks a scheduler for).
  int worker_threads = 1;
  // Workers the job starts with.
  int num_workers = 0;
  // Local: workers may be bound to cores of their own (`--bind_workers`).
  bool bind_workers = true;
  // Where processes on this machine write (cluster/output_relay.h); -1:
  // the starter's own stdout and stderr.
  int output_fd = -1;
  // A master's spare fork server (`elasticdl master --fork_server_fd`;
  // owned): for a local job's processes; closed otherwise. -1: none.
  int fork_server_fd = -1;
};

// `on_exit` runs (on a backend thread) for every process that ends.
StatusOr<std::unique_ptr<ClusterBackend>> MakeBackend(const BackendConfig& config,
                                                      ClusterBackend::ExitCallback on_exit);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_BACKENDS_H_
