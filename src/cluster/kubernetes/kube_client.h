// A client of the Kubernetes REST API (cpp-httplib over OpenSSL): JSON
// objects in and out, and watches streamed event by event.
//
// TLS: the server's certificate is verified against the configuration's
// certificate authority (or the system's) and its host name, unless the
// kubeconfig says insecure-skip-tls-verify. Every request uses a
// connection of its own, so calls from several threads never wait for each
// other, and a long watch does not hold up a create.
//
// Errors: the HTTP status becomes a status code (401 UNAUTHENTICATED, 403
// PERMISSION_DENIED, 404 NOT_FOUND, 409 ALREADY_EXISTS, 410 OUT_OF_RANGE,
// 422 and 400 INVALID_ARGUMENT, others and unreachable servers UNAVAILABLE)
// whose message carries the API's own (a v1 Status's message).
#ifndef ELASTICDL_CLUSTER_KUBERNETES_KUBE_CLIENT_H_
#define ELASTICDL_CLUSTER_KUBERNETES_KUBE_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cluster/kubernetes/kube_config.h"
#include "elasticdl/status.h"

namespace httplib {
class ClientImpl;
}  // namespace httplib

namespace elasticdl::cluster {

// The API as the backend uses it; tests give the backend a fake.
class KubeClient {
 public:
  virtual ~KubeClient() = default;

  // `path` is the API path with its query, e.g.
  // "/api/v1/namespaces/ns/pods?labelSelector=a%3Db".
  virtual StatusOr<nlohmann::json> Get(const std::string& path) = 0;
  virtual StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) = 0;
  // DELETE with DeleteOptions (`body`, may be null).
  virtual StatusOr<nlohmann::json> Delete(const std::string& path, const nlohmann::json& body) = 0;

  // GETs `path` (a watch URL) and calls `on_event` with each event object
  // ({"type": ..., "object": ...}) as it arrives, until the server ends
  // the stream (OK), `on_event` returns false (OK), Cancel() is called
  // (CANCELLED) or the request fails. Blocks.
  using EventCallback = std::function<bool(const nlohmann::json& event)>;
  virtual Status Watch(const std::string& path, const EventCallback& on_event) = 0;
  // Ends the watches in progress, now and for good (for shutting down).
  virtual void Cancel() = 0;
};

// The REST API over HTTP(S).
class HttpKubeClient : public KubeClient {
 public:
  // Checks the configuration's certificates and key; an error names the
  // configuration they came from.
  static StatusOr<std::unique_ptr<HttpKubeClient>> Create(KubeConfig config);
  ~HttpKubeClient() override;

  StatusOr<nlohmann::json> Get(const std::string& path) override;
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) override;
  StatusOr<nlohmann::json> Delete(const std::string& path, const nlohmann::json& body) override;
  Status Watch(const std::string& path, const EventCallback& on_event) override;
  void Cancel() override;

 private:
  explicit HttpKubeClient(KubeConfig config);
  StatusOr<std::unique_ptr<httplib::ClientImpl>> Connect(int read_timeout_s) const;

  const KubeConfig config_;
  std::string host_;
  int port_ = 0;
  bool tls_ = false;

  // The configuration's certificate authorities, in a file of their own
  // in memory (closed with the client); -1: none.
  int ca_fd_ = -1;

  std::mutex mu_;
  std::atomic<bool> cancelled_{false};
  std::set<httplib::ClientImpl*> watches_;
};

// "a=b,c=d" URL-encoded for a labelSelector query.
std::string UrlEncode(const std::string& s);

}  // namespace elasticdl::cluster

#endif  // ELASTICDL_CLUSTER_KUBERNETES_KUBE_CLIENT_H_
