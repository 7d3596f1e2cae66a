#include "cluster/kubernetes/kube_client.h"

#include <absl/strings/numbers.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::cluster {
namespace {

using nlohmann::json;

// Seconds a non-watch request may take.
constexpr int kRequestTimeoutS = 30;

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

bool HoldsCertificate(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
  X509_free(cert);
  return cert != nullptr;
}

// `contents` in an anonymous file in memory (memfd): nothing on disk, gone
// when `fd` is closed; /proc/self/fd/<fd> names it for the TLS library.
StatusOr<int> MemoryFile(const std::string& contents) {
  const int fd = ::memfd_create("elasticdl-kube-ca", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(StrCat("memfd_create: ", std::strerror(errno)));
  if (::write(fd, contents.data(), contents.size()) != static_cast<ssize_t>(contents.size())) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(StrCat("writing the certificate authority: ", std::strerror(err)));
  }
  return fd;
}

absl::StatusCode CodeOf(int http_status) {
  switch (http_status) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kAlreadyExists;
    case 410:
      return absl::StatusCode::kOutOfRange;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

// The API's answer as a status: a v1 Status object's message when the body
// holds one.
Status HttpError(const std::string& method, const std::string& path, int http_status,
                 const std::string& body) {
  std::string message;
  json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && status.value("message", json()).is_string()) {
    message = status["message"].get<std::string>();
  } else {
    message = body.substr(0, 200);
  }
  return Status(CodeOf(http_status), StrCat("Kubernetes API: ", method, " ", path, ": HTTP ",
                                            http_status, message.empty() ? "" : ": ", message));
}

StatusOr<json> Answer(const std::string& method, const std::string& path,
                      const httplib::Result& result, const KubeConfig& config) {
  if (!result) {
    std::string why = httplib::to_string(result.error());
    if (result.error() == httplib::Error::SSLServerVerification) {
      why = StrCat("the server's certificate does not verify against ",
                   config.ca_pem.empty() ? "the system's certificate authorities"
                                         : "the configuration's certificate authority");
    }
    return absl::UnavailableError(StrCat("Kubernetes API at ", config.server, " (", config.source,
                                         "): ", method, " ", path, ": ", why));
  }
  if (result->status < 200 || result->status >= 300) {
    return HttpError(method, path, result->status, result->body);
  }
  json body = json::parse(result->body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return absl::UnavailableError(
        StrCat("Kubernetes API: ", method, " ", path, ": the answer is not JSON"));
  }
  return body;
}

}  // namespace

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

HttpKubeClient::HttpKubeClient(KubeConfig config) : config_(std::move(config)) {}

HttpKubeClient::~HttpKubeClient() {
  if (ca_fd_ >= 0) ::close(ca_fd_);
}

StatusOr<std::unique_ptr<HttpKubeClient>> HttpKubeClient::Create(KubeConfig config) {
  static const std::regex kUrl(R"(^(https?)://(\[[^\]]+\]|[^:/]+)(:(\d+))?/?$)");
  std::smatch m;
  if (!std::regex_match(config.server, m, kUrl)) {
    return absl::InvalidArgumentError(
        StrCat(config.source, ": server '", config.server, "' is not http(s)://HOST[:PORT]"));
  }
  std::unique_ptr<HttpKubeClient> client(new HttpKubeClient(std::move(config)));
  client->tls_ = m[1] == "https";
  client->host_ = m[2];
  if (client->host_.front() == '[')
    client->host_ = client->host_.substr(1, client->host_.size() - 2);
  client->port_ = client->tls_ ? 443 : 80;
  if (m[4].matched && (!absl::SimpleAtoi(m[4].str(), &client->port_) || client->port_ < 1 ||
                       client->port_ > 65535)) {
    return absl::InvalidArgumentError(StrCat(client->config_.source, ": server '",
                                             client->config_.server,
                                             "' has no port between 1 and 65535"));
  }
  const KubeConfig& c = client->config_;
  if (!c.ca_pem.empty()) {
    if (!HoldsCertificate(c.ca_pem)) {
      return absl::InvalidArgumentError(
          StrCat(c.source, ": the certificate authority holds no PEM certificate"));
    }
    // The TLS library trusts the system's authorities as well unless the
    // configuration's come from a file: only they may vouch for the server.
    EDL_ASSIGN_OR_RETURN(client->ca_fd_, MemoryFile(c.ca_pem));
  }
  if (!c.client_cert_pem.empty()) {
    Bio cert_bio = MemoryBio(c.client_cert_pem);
    X509* cert = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) {
      return absl::InvalidArgumentError(
          StrCat(c.source, ": the client certificate is not a PEM certificate"));
    }
    Bio key_bio = MemoryBio(c.client_key_pem);
    EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
    const bool matches = key != nullptr && X509_check_private_key(cert, key) == 1;
    X509_free(cert);
    EVP_PKEY_free(key);
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          StrCat(c.source, ": the client key is not a PEM private key"));
    }
    if (!matches) {
      return absl::InvalidArgumentError(
          StrCat(c.source, ": the client key does not belong to the client certificate"));
    }
  }
  if (!client->tls_ && (!c.client_cert_pem.empty() || !c.token.empty())) {
    return absl::InvalidArgumentError(
        StrCat(c.source, ": credentials would go to ", c.server, " in clear text: use https"));
  }
  return client;
}

StatusOr<std::unique_ptr<httplib::ClientImpl>> HttpKubeClient::Connect(int read_timeout_s) const {
  std::unique_ptr<httplib::ClientImpl> client;
  if (tls_) {
    std::unique_ptr<httplib::SSLClient> ssl;
    if (!config_.client_cert_pem.empty()) {
      Bio cert_bio = MemoryBio(config_.client_cert_pem);
      Bio key_bio = MemoryBio(config_.client_key_pem);
      X509* cert = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
      EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
      // The client's context takes its own references.
      ssl = std::make_unique<httplib::SSLClient>(host_, port_, cert, key);
      X509_free(cert);
      EVP_PKEY_free(key);
    } else {
      ssl = std::make_unique<httplib::SSLClient>(host_, port_);
    }
    if (!ssl->is_valid()) {
      return absl::InternalError(
          StrCat(config_.source, ": cannot set up a TLS context with its client certificate"));
    }
    ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    if (ca_fd_ >= 0) ssl->set_ca_cert_path(StrCat("/proc/self/fd/", ca_fd_));
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(host_, port_);
  }
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    // A rotated token replaces the one read at start.
    if (StatusOr<std::string> now = ReadToken(config_.token_file); now.ok() && !now->empty()) {
      token = *now;
    }
  }
  if (!token.empty()) client->set_bearer_token_auth(token);
  client->set_connection_timeout(5);
  client->set_read_timeout(read_timeout_s);
  client->set_write_timeout(kRequestTimeoutS);
  return client;
}

StatusOr<json> HttpKubeClient::Get(const std::string& path) {
  EDL_ASSIGN_OR_RETURN(auto client, Connect(kRequestTimeoutS));
  return Answer("GET", path, client->Get(path), config_);
}

StatusOr<json> HttpKubeClient::Post(const std::string& path, const json& body) {
  EDL_ASSIGN_OR_RETURN(auto client, Connect(kRequestTimeoutS));
  return Answer("POST", path, client->Post(path, body.dump(), "application/json"), config_);
}

StatusOr<json> HttpKubeClient::Delete(const std::string& path, const json& body) {
  EDL_ASSIGN_OR_RETURN(auto client, Connect(kRequestTimeoutS));
  return Answer("DELETE", path,
                client->Delete(path, body.is_null() ? "" : body.dump(),
                               body.is_null() ? "" : "application/json"),
                config_);
}

Status HttpKubeClient::Watch(const std::string& path, const EventCallback& on_event) {
  // The server ends a watch after its timeoutSeconds; a silent connection
  // is dead after this long.
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<httplib::ClientImpl> client, Connect(15 * 60));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return absl::CancelledError("watch cancelled");
    watches_.insert(client.get());
  }
  int http_status = 0;
  std::string pending;  // a partial line, or an error's body
  bool stopped = false;
  httplib::Result result = client->Get(
      path, httplib::Headers{},
      [&](const httplib::Response& response) {
        http_status = response.status;
        return !cancelled_.load();
      },
      [&](const char* data, size_t length) {
        if (cancelled_.load()) return false;
        pending.append(data, length);
        if (http_status != 200) return true;
        for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
          json event = json::parse(pending.substr(0, end), nullptr, false);
          pending.erase(0, end + 1);
          if (event.is_object() && !on_event(event)) {
            stopped = true;
            return false;
          }
        }
        return true;
      });
  bool cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watches_.erase(client.get());
    cancelled = cancelled_;
  }
  if (stopped) return absl::OkStatus();
  if (cancelled) return absl::CancelledError("watch cancelled");
  if (http_status != 0 && http_status != 200) {
    return HttpError("GET", path, http_status, pending);
  }
  if (!result) {
    return absl::UnavailableError(StrCat("Kubernetes API at ", config_.server, ": watch ", path,
                                         ": ", httplib::to_string(result.error())));
  }
  return absl::OkStatus();
}

void HttpKubeClient::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  for (httplib::ClientImpl* client : watches_) client->stop();
}

}  // namespace elasticdl::cluster
