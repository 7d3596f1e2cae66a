// Fuzzes the kubeconfig reader (cluster/kubernetes/kube_config.h): YAML with
// clusters, contexts and users, certificates inline (base64) or as files.
//
// Input: a kubeconfig file. Reading it either fails, naming the file, or
// gives a server URL.
#include <cstdint>
#include <string>

#include "cluster/kubernetes/kube_config.h"
#include "fuzz_check.h"
#include "seed_mode.h"
#include "temp_file.h"

namespace elasticdl::fuzz {
namespace {

Status WriteSeeds(const std::string& dir) {
  EDL_RETURN_IF_ERROR(WriteSeed(dir, "token", R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
contexts:
- name: dev
  context: {cluster: c, user: u, namespace: team}
users:
- name: u
  user: {token: abc.def}
)"));
  return WriteSeed(dir, "insecure", R"(clusters:
- {name: c, cluster: {server: "http://localhost:8080", insecure-skip-tls-verify: true}}
contexts:
- {name: x, context: {cluster: c, user: u}}
current-context: x
users:
- {name: u, user: {tokenFile: /nonexistent/token, exec: {command: aws}}}
)");
}

}  // namespace
}  // namespace elasticdl::fuzz

EDL_FUZZ_SEED_WRITER(&elasticdl::fuzz::WriteSeeds)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace elasticdl;
  const std::string path = fuzz::WriteTempFile("kubeconfig_fuzzer", ".yaml", data, size);
  StatusOr<cluster::KubeConfig> config = cluster::LoadKubeConfig(path);
  if (!config.ok()) {
    EDL_FUZZ_CHECK(config.status().code() != StatusCode::kInternal &&
                       config.status().code() != StatusCode::kUnknown,
                   "LoadKubeConfig: unexpected status {}", config.status().ToString());
    return 0;
  }
  EDL_FUZZ_CHECK(!config->server.empty(), "a kubeconfig without a server was accepted");
  return 0;
}
