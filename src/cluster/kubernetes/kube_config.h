// Where the Kubernetes API is and who we are to it: a kubeconfig file's
// current context (as kubectl reads it) or the pod's service account.
#ifndef ELASTICDL_CLUSTER_KUBERNETES_KUBE_CONFIG_H_
#define ELASTICDL_CLUSTER_KUBERNETES_KUBE_CONFIG_H_

#include <string>

#include "common/environment.h"
#include "elasticdl/status.h"

namespace elasticdl::cluster {

// The service account's files in every pod (token, ca.crt, namespace).
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  // "https://host:port" (or http:// for an unsecured test server).
  std::string server;
  // PEM certificates the server's certificate must chain to; empty: the
  // system's trusted ones.
  std::string ca_pem;
  // The kubeconfig's insecure-skip-tls-verify: no verification at all.
  bool insecure_skip_tls_verify = false;
  // A client certificate and its key (PEM), or a bearer token, or neither.
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;
  // Where the token came from (a service account's, a kubeconfig's
  // tokenFile): read again for each request, since such tokens rotate.
  std::string token_file;
  // The context's namespace, else the service account's, else "default".
  std::string ns = "default";
  // For messages: "kubeconfig /home/u/.kube/config, context kind-dev".
  std::string source;
};

// Reads the kubeconfig at `path`: `context` (empty: its current-context),
// that context's cluster and user. Certificates and keys may be given
// inline (*-data, base64) or as files (relative to the kubeconfig's
// directory). An error names the file and the entry: a missing context, a
// user that needs an exec or auth-provider plugin (not supported: give it
// a token or a client certificate), unreadable certificate files.
StatusOr<KubeConfig> LoadKubeConfig(const std::string& path, const std::string& context = "");

// The pod's service account: `sa_dir`'s token, ca.crt and namespace, and
// the API server at https://`host`:`port` (KUBERNETES_SERVICE_HOST/_PORT).
StatusOr<KubeConfig> LoadInClusterConfig(const std::string& host, const std::string& port,
                                         const std::string& sa_dir = kServiceAccountDir);

// A token file's token (surrounding whitespace dropped).
StatusOr<std::string> ReadToken(const std::string& path);

// What the environment points at, as client libraries choose: $KUBECONFIG
// (the first file of the list), else the in-cluster service account when
// KUBERNETES_SERVICE_HOST is set, else ~/.kube/config.
StatusOr<KubeConfig> KubeConfigFromEnvironment(const Environment& env);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_KUBERNETES_KUBE_CONFIG_H_
