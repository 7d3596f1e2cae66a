#include "cluster/kubernetes/kube_config.h"

#include <absl/strings/ascii.h>
#include <absl/strings/escaping.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

namespace fs = std::filesystem;

std::string Scalar(const YAML::Node& map, const char* key) {
  if (!map.IsMap() || !map[key] || !map[key].IsScalar()) return {};
  return map[key].as<std::string>();
}

// The entry of `list` (clusters, users, contexts) named `name`.
YAML::Node Named(const YAML::Node& list, const std::string& name) {
  if (!list.IsSequence()) return YAML::Node();
  for (const YAML::Node& entry : list) {
    if (entry.IsMap() && Scalar(entry, "name") == name) return entry;
  }
  return YAML::Node();
}

// A certificate or key given inline (`<key>-data`, base64) or as a file.
StatusOr<std::string> Material(const YAML::Node& map, const std::string& key, const fs::path& dir,
                               const std::string& where) {
  if (std::string data = Scalar(map, (key + "-data").c_str()); !data.empty()) {
    std::string pem;
    if (!absl::Base64Unescape(data, &pem)) {
      return absl::InvalidArgumentError(StrCat(where, ": ", key, "-data is not base64"));
    }
    return pem;
  }
  std::string file = Scalar(map, key.c_str());
  if (file.empty()) return std::string();
  fs::path path = fs::path(file).is_absolute() ? fs::path(file) : dir / file;
  StatusOr<std::string> pem = ReadFileToString(path.string());
  if (!pem.ok()) {
    return absl::InvalidArgumentError(
        StrCat(where, ": ", key, " ", path.string(), ": ", pem.status().message()));
  }
  return *pem;
}

}  // namespace

StatusOr<std::string> ReadToken(const std::string& path) {
  EDL_ASSIGN_OR_RETURN(std::string token, ReadFileToString(path));
  return std::string(absl::StripAsciiWhitespace(token));
}

StatusOr<KubeConfig> LoadKubeConfig(const std::string& path, const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return absl::NotFoundError(StrCat("kubeconfig ", path, ": cannot read it"));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat("kubeconfig ", path, ": not YAML: ", e.what()));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(StrCat("kubeconfig ", path, ": expected a Config mapping"));
  }
  const std::string name = context.empty() ? Scalar(root, "current-context") : context;
  if (name.empty()) {
    return absl::InvalidArgumentError(StrCat("kubeconfig ", path,
                                             ": no current-context (choose one with kubectl config "
                                             "use-context NAME)"));
  }
  KubeConfig config;
  config.source = StrCat("kubeconfig ", path, ", context ", name);
  const YAML::Node ctx = Named(root["contexts"], name)["context"];
  if (!ctx.IsMap()) {
    return absl::InvalidArgumentError(StrCat("kubeconfig ", path, ": no context '", name, "'"));
  }
  const std::string cluster_name = Scalar(ctx, "cluster");
  const std::string user_name = Scalar(ctx, "user");
  if (std::string ns = Scalar(ctx, "namespace"); !ns.empty()) config.ns = ns;

  const fs::path dir = fs::path(path).parent_path();
  const YAML::Node cluster = Named(root["clusters"], cluster_name)["cluster"];
  const std::string cluster_where = StrCat("kubeconfig ", path, ", cluster '", cluster_name, "'");
  if (!cluster.IsMap()) return absl::InvalidArgumentError(cluster_where + ": not defined");
  config.server = Scalar(cluster, "server");
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return absl::InvalidArgumentError(
        StrCat(cluster_where, ": server '", config.server, "' is not an http(s) URL"));
  }
  config.insecure_skip_tls_verify = Scalar(cluster, "insecure-skip-tls-verify") == "true";
  EDL_ASSIGN_OR_RETURN(config.ca_pem,
                       Material(cluster, "certificate-authority", dir, cluster_where));

  if (user_name.empty()) return config;
  const YAML::Node user = Named(root["users"], user_name)["user"];
  const std::string user_where = StrCat("kubeconfig ", path, ", user '", user_name, "'");
  if (!user.IsMap()) return absl::InvalidArgumentError(user_where + ": not defined");
  if (user["exec"] || user["auth-provider"]) {
    return absl::UnimplementedError(
        StrCat(user_where, ": credentials from an ", user["exec"] ? "exec plugin" : "auth-provider",
               " are not supported; give the user a token or a client certificate"));
  }
  if (!Scalar(user, "username").empty()) {
    return absl::UnimplementedError(
        StrCat(user_where,
               ": basic authentication (username/password) is not supported; give "
               "the user a token or a client certificate"));
  }
  EDL_ASSIGN_OR_RETURN(config.client_cert_pem,
                       Material(user, "client-certificate", dir, user_where));
  EDL_ASSIGN_OR_RETURN(config.client_key_pem, Material(user, "client-key", dir, user_where));
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return absl::InvalidArgumentError(
        StrCat(user_where, ": a client certificate needs its key, and a key its certificate"));
  }
  config.token = Scalar(user, "token");
  if (std::string file = Scalar(user, "tokenFile"); config.token.empty() && !file.empty()) {
    config.token_file = fs::path(file).is_absolute() ? file : (dir / file).string();
    StatusOr<std::string> token = ReadToken(config.token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          StrCat(user_where, ": tokenFile ", config.token_file, ": ", token.status().message()));
    }
    config.token = *token;
  }
  return config;
}

StatusOr<KubeConfig> LoadInClusterConfig(const std::string& host, const std::string& port,
                                         const std::string& sa_dir) {
  KubeConfig config;
  config.source = StrCat("service account ", sa_dir);
  config.token_file = sa_dir + "/token";
  StatusOr<std::string> token = ReadToken(config.token_file);
  if (!token.ok()) {
    return absl::FailedPreconditionError(
        StrCat("in-cluster configuration: ", config.token_file, ": ", token.status().message(),
               " (does the pod mount its service account token?)"));
  }
  config.token = *token;
  StatusOr<std::string> ca = ReadFileToString(sa_dir + "/ca.crt");
  if (!ca.ok()) {
    return absl::FailedPreconditionError(
        StrCat("in-cluster configuration: ", sa_dir, "/ca.crt: ", ca.status().message()));
  }
  config.ca_pem = *ca;
  if (StatusOr<std::string> ns = ReadFileToString(sa_dir + "/namespace"); ns.ok()) {
    config.ns = std::string(absl::StripAsciiWhitespace(*ns));
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  config.server = StrCat("https://", ipv6 ? "[" + host + "]" : host, ":", port);
  return config;
}

StatusOr<KubeConfig> KubeConfigFromEnvironment(const Environment& env) {
  if (!env.kubeconfig.empty()) return LoadKubeConfig(env.kubeconfig);
  if (!env.kubernetes_service_host.empty()) {
    return LoadInClusterConfig(env.kubernetes_service_host, env.kubernetes_service_port.empty()
                                                                ? "443"
                                                                : env.kubernetes_service_port);
  }
  if (env.home.empty()) {
    return absl::FailedPreconditionError(
        "no Kubernetes configuration: set KUBECONFIG, or HOME for ~/.kube/config");
  }
  return LoadKubeConfig(StrCat(env.home, "/.kube/config"));
}

}  // namespace elasticdl::cluster
