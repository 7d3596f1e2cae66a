// Kubeconfig files as kubectl reads them, the service account of a pod,
// and the errors a broken configuration gets.
#include "cluster/kubernetes/kube_config.h"

#include <absl/strings/escaping.h>
#include <gtest/gtest.h>

#include "cluster/kubernetes/kube_client.h"
#include "common/file.h"
#include "testing/temp_dir.h"

namespace elasticdl::cluster {
namespace {

// Not a real certificate: the loader only carries the text.
constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string Config(const std::string& user) {
  return R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )" +
         absl::Base64Escape(kPem) + R"(
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
- name: other
  context: {cluster: c1, user: u1}
users:
- name: u1
  user:
)" + user;
}

class KubeConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const std::string path = dir_.path() + "/config";
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(KubeConfigTest, TokenAndCurrentContext) {
  auto config = LoadKubeConfig(Write(Config("    token: abc123\n")));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, kPem);
  EXPECT_EQ(config->token, "abc123");
  EXPECT_EQ(config->ns, "team-a");
  EXPECT_TRUE(config->client_cert_pem.empty());
  auto other = LoadKubeConfig(dir_.path() + "/config", "other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->ns, "default");
}

TEST_F(KubeConfigTest, ClientCertificateFilesRelativeToTheConfig) {
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/client.crt", "CERT").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/client.key", "KEY").ok());
  auto config = LoadKubeConfig(
      Write(Config("    client-certificate: client.crt\n    client-key: client.key\n")));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->client_cert_pem, "CERT");
  EXPECT_EQ(config->client_key_pem, "KEY");
}

TEST_F(KubeConfigTest, BrokenConfigurationsSayWhatIsWrong) {
  auto missing =
      LoadKubeConfig(Write(Config("    client-certificate: nowhere.crt\n"
                                  "    client-key: nowhere.key\n")));
  EXPECT_NE(std::string(missing.status().message()).find("user 'u1': client-certificate"),
            std::string::npos)
      << missing.status();
  auto exec = LoadKubeConfig(Write(Config("    exec: {command: aws}\n")));
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(exec.status().message()).find("exec plugin"), std::string::npos);
  auto no_context = LoadKubeConfig(Write(Config("    token: t\n")), "prod");
  EXPECT_NE(std::string(no_context.status().message()).find("no context 'prod'"),
            std::string::npos);
  auto not_yaml = LoadKubeConfig(Write("clusters: [\n"));
  EXPECT_NE(std::string(not_yaml.status().message()).find("not YAML"), std::string::npos);
  auto bad_base64 = LoadKubeConfig(
      Write(Config("    client-certificate-data: '%%%'\n    client-key-data: '%%%'\n")));
  EXPECT_NE(
      std::string(bad_base64.status().message()).find("client-certificate-data is not base64"),
      std::string::npos)
      << bad_base64.status();
  EXPECT_EQ(LoadKubeConfig(dir_.path() + "/absent").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KubeConfigTest, ServiceAccountOfAPod) {
  const std::string sa = dir_.path() + "/sa";
  ASSERT_TRUE(CreateDirectories(sa).ok());
  ASSERT_TRUE(WriteFileAtomically(sa + "/token", "pod-token\n").ok());
  ASSERT_TRUE(WriteFileAtomically(sa + "/ca.crt", kPem).ok());
  ASSERT_TRUE(WriteFileAtomically(sa + "/namespace", "jobs").ok());
  auto config = LoadInClusterConfig("10.96.0.1", "443", sa);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token, "pod-token");
  EXPECT_EQ(config->ns, "jobs");
  auto v6 = LoadInClusterConfig("fd00::1", "6443", sa);
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->server, "https://[fd00::1]:6443");
  auto none = LoadInClusterConfig("10.96.0.1", "443", dir_.path() + "/nothing");
  EXPECT_NE(std::string(none.status().message()).find("service account token"), std::string::npos)
      << none.status();
}

TEST_F(KubeConfigTest, ClientRefusesBadMaterialAndClearText) {
  KubeConfig config;
  config.source = "test";
  config.server = "https://127.0.0.1:1";
  config.ca_pem = "not a certificate";
  EXPECT_NE(std::string(HttpKubeClient::Create(config).status().message())
                .find("holds no PEM certificate"),
            std::string::npos);
  config.ca_pem.clear();
  config.server = "http://127.0.0.1:1";
  config.token = "secret";
  EXPECT_NE(std::string(HttpKubeClient::Create(config).status().message()).find("clear text"),
            std::string::npos);
  config.server = "ftp://x";
  EXPECT_EQ(HttpKubeClient::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* server : {"https://h:99999999999999", "https://h:70000", "https://h:0"}) {
    config.server = server;
    auto refused = HttpKubeClient::Create(config);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << server;
    EXPECT_NE(std::string(refused.status().message()).find("no port between 1 and 65535"),
              std::string::npos)
        << refused.status();
  }
  // Nothing listens there: UNAVAILABLE, naming the server.
  config.server = "http://127.0.0.1:1";
  config.token.clear();
  auto client = HttpKubeClient::Create(config);
  ASSERT_TRUE(client.ok());
  auto got = (*client)->Get("/api/v1/namespaces/default/pods");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(got.status().message()).find("http://127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace elasticdl::cluster
