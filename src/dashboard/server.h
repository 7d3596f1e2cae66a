// The dashboard's HTTPS server: the web page (static files from the web
// directory installed beside the binary), the JSON API behind it and the
// Prometheus metrics page, all behind a login.
//
//   GET /                    the dashboard page
//   GET /static/NAME         its scripts, styles and the chart library
//   GET /api/job             status, summary, task counts, workers, servers
//   GET /api/curves?since=N  loss points from the N-th on, evaluations
//   GET /api/events?since=N  the timeline from the N-th event on
//   GET /metrics             Prometheus text format
//
// A person opens a login link (NewLoginUrl(): /?login=CODE). The code is
// good once: the server answers with a session cookie (HttpOnly, Secure,
// SameSite=Strict) and sends the browser on to the page without the code,
// so a link left in a log or a browser's history opens nothing once used,
// and nothing at all once the job (this server) is gone. Programs
// (Prometheus, scripts) send the job's token: Authorization: Bearer TOKEN.
// Anything else is 401; unknown paths are 404; only GET and HEAD are served.
//
// With a certificate (ServerOptions::tls_certificate, the job's; see
// rpc/job_credentials.h) it speaks HTTPS only. Browsers do not know the
// job's CA: they warn once, unless the CA is added to them.
//
// libmicrohttpd answers: each connection's request head lives in a buffer
// of fixed size (ServerOptions::connection_memory), so a request with more
// or longer headers than fit is refused with 431 before anything grows, and
// the number of connections and their idle time are bounded. What anybody
// on the network sends cannot take the master's memory.
#ifndef ELASTICDL_DASHBOARD_SERVER_H_
#define ELASTICDL_DASHBOARD_SERVER_H_

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "dashboard/job_view.h"
#include "elasticdl/status.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace elasticdl::dashboard {

struct ServerOptions {
  std::string host = "127.0.0.1";
  // 0 picks a free port.
  int port = 0;
  // The job's token, for programs (Authorization: Bearer).
  std::string token;
  // PEM. Both set: HTTPS with this certificate; both empty: HTTP.
  std::string tls_certificate;
  std::string tls_private_key;
  // Where index.html, dashboard.js, ... are; empty: WebDir().
  std::string web_dir;
  // Threads answering requests.
  int threads = 2;
  // At most this many connections at a time (a browser keeps a few open;
  // Prometheus one); more wait for the kernel's backlog.
  int max_connections = 64;
  // A connection idle this long is closed.
  int idle_timeout_s = 10;
  // Bytes per connection for the request head (request line and headers)
  // and reading; a head larger than that is refused with 431.
  size_t connection_memory = 32 * 1024;
};

// The web directory installed beside the running binary
// (<bin>/../share/elasticdl/web); $ELASTICDL_WEB_DIR (Environment::web_dir)
// goes in ServerOptions::web_dir instead.
std::string WebDir();

class Server {
 public:
  // Starts serving `view` (not owned; must outlive the server).
  static StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options, const JobView* view);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // "https://host:port" ("http://" without a certificate).
  const std::string& url() const { return url_; }
  // A new link a person opens to log in: url()/?login=CODE, the code good
  // for one login (at most kMaxLoginCodes unused ones are kept; older go).
  StatusOr<std::string> NewLoginUrl();
  void Stop();

  static constexpr size_t kMaxLoginCodes = 16;
  static constexpr size_t kMaxSessions = 256;

 private:
  struct Reply;
  friend class RequestHandler;
  Server() = default;
  // What a request gets.
  Reply Answer(MHD_Connection* connection, const std::string& method, const std::string& path);
  Reply File(const std::string& name) const;
  // Whether the request may see the job: a session cookie, or the token.
  bool Authorized(MHD_Connection* connection);
  // Trades a login code for a new session: the session, empty if the code
  // is not one (or was used).
  std::string Login(const std::string& code);

  const JobView* view_ = nullptr;
  MHD_Daemon* daemon_ = nullptr;
  std::string url_;
  std::string token_;
  bool tls_ = false;
  // libmicrohttpd reads them at start; kept for its lifetime.
  std::string tls_certificate_, tls_private_key_;
  std::mutex mu_;
  std::deque<std::string> login_codes_;  // unused, oldest first
  std::deque<std::string> sessions_;     // oldest first
  // Static files by name, read at start.
  std::map<std::string, std::pair<std::string, std::string>> files_;  // name -> (type, content)
};

}  // namespace elasticdl::dashboard

#endif  // ELASTICDL_DASHBOARD_SERVER_H_
