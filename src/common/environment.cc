#include "common/environment.h"

#include <cstdlib>

namespace elasticdl {
namespace {

// The variable's value; empty when it is unset or empty.
std::string Get(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

Environment ReadEnvironment() {
  Environment env;
  if (std::string tmp = Get("TMPDIR"); !tmp.empty()) env.temp_dir = tmp;
  env.home = Get("HOME");
  if (std::string dir = Get("ELASTICDL_CACHE_DIR"); !dir.empty()) {
    env.cache_dir = dir;
  } else if (std::string xdg = Get("XDG_CACHE_HOME"); !xdg.empty()) {
    env.cache_dir = xdg + "/elasticdl";
  } else {
    env.cache_dir = (env.home.empty() ? env.temp_dir : env.home) + "/.cache/elasticdl";
  }
  env.web_dir = Get("ELASTICDL_WEB_DIR");
  const std::string kubeconfig = Get("KUBECONFIG");
  env.kubeconfig = kubeconfig.substr(0, kubeconfig.find(':'));
  env.kubernetes_service_host = Get("KUBERNETES_SERVICE_HOST");
  env.kubernetes_service_port = Get("KUBERNETES_SERVICE_PORT");
  env.omp_wait_policy = Get("OMP_WAIT_POLICY");
  env.openblas_coretype = Get("OPENBLAS_CORETYPE");
  env.openblas_coretype_chosen = std::getenv(kOpenblasCoretypeChosenVariable) != nullptr;
  env.job_supervisor = Get(kJobSupervisorVariable);
  return env;
}

}  // namespace elasticdl
