// What a process takes from its environment variables. They are read once,
// at the edge — the command line (src/cli) and the client library
// (src/client, src/experiment) call ReadEnvironment() — and handed down in
// options from there, so that the master, the servers, the workers and the
// backends behave as their options say, in a test as in a job. Nothing
// else calls getenv (scripts/lint.sh checks); a child process inherits the
// environment as it is (cluster/process.h).
#ifndef ELASTICDL_COMMON_ENVIRONMENT_H_
#define ELASTICDL_COMMON_ENVIRONMENT_H_

#include <string>

namespace elasticdl {

struct Environment {
  // Temporary files and the default roots of job and experiment
  // directories: $TMPDIR, else /tmp.
  std::string temp_dir = "/tmp";
  // Built model zoos and fetched Git zoos: $ELASTICDL_CACHE_DIR, else
  // $XDG_CACHE_HOME/elasticdl, else $HOME/.cache/elasticdl.
  std::string cache_dir;
  // The dashboard's web files: $ELASTICDL_WEB_DIR; empty: those installed
  // beside the binary.
  std::string web_dir;
  // Kubernetes, as client libraries find it: the first file of
  // $KUBECONFIG, else the pod's service account when
  // $KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config.
  std::string kubeconfig;
  std::string kubernetes_service_host;
  std::string kubernetes_service_port;
  std::string home;
  // $OMP_WAIT_POLICY if the user set it; empty: unset (the job's local
  // processes are then started with PASSIVE: see cluster/local_backend.h).
  std::string omp_wait_policy;
  // $OPENBLAS_CORETYPE; empty: unset. Set by the user, it is theirs; set
  // with $ELASTICDL_OPENBLAS_CORETYPE_CHOSEN, it was chosen by this program
  // (common/blas_kernels.h).
  std::string openblas_coretype;
  bool openblas_coretype_chosen = false;
  // $ELASTICDL_JOB_SUPERVISOR: "<pid>:<start time>" of the process whose
  // local backend started this job's master (set for the master, inherited
  // by the processes it starts); empty: none.
  std::string job_supervisor;
};

// The variable that says OPENBLAS_CORETYPE was chosen by this program.
inline constexpr char kOpenblasCoretypeChosenVariable[] = "ELASTICDL_OPENBLAS_CORETYPE_CHOSEN";

// The variable that names the process supervising a job's local processes.
inline constexpr char kJobSupervisorVariable[] = "ELASTICDL_JOB_SUPERVISOR";

// This process's environment.
Environment ReadEnvironment();

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_ENVIRONMENT_H_
