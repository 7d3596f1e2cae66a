// The dashboard's HTTP server: the web page (static files from the web
// directory installed beside the binary), the JSON API behind it and the
// Prometheus metrics page, all guarded by the job's token.
//
//   GET /                    the dashboard page
//   GET /static/NAME         its scripts, styles and the chart library
//   GET /api/job             status, summary, task counts, workers, servers
//   GET /api/curves?since=N  loss points from the N-th on, evaluations
//   GET /api/events?since=N  the timeline from the N-th event on
//   GET /metrics             Prometheus text format
//
// The token goes in the query (?token=T; the page then sets a cookie), a
// cookie (elasticdl_token=T) or an Authorization: Bearer T header. Anything
// else is 401; unknown paths are 404; only GET and HEAD are served.
//
// libmicrohttpd answers: each connection's request head lives in a buffer
// of fixed size (ServerOptions::connection_memory), so a request with more
// or longer headers than fit is refused with 431 before anything grows, and
// the number of connections and their idle time are bounded. What anybody
// on the network sends cannot take the master's memory.
#ifndef ELASTICDL_DASHBOARD_SERVER_H_
#define ELASTICDL_DASHBOARD_SERVER_H_

#include <cstddef>
#include <map>
#include <memory>
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
  std::string token;
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

  // "http://host:port" (no token).
  const std::string& url() const { return url_; }
  // The URL a person opens: with the token in the query.
  std::string url_with_token() const;
  void Stop();

 private:
  struct Reply;
  friend class RequestHandler;
  Server() = default;
  // What a request gets.
  Reply Answer(MHD_Connection* connection, const std::string& method,
               const std::string& path) const;
  Reply File(const std::string& name) const;

  const JobView* view_ = nullptr;
  MHD_Daemon* daemon_ = nullptr;
  std::string url_;
  std::string token_;
  // Static files by name, read at start.
  std::map<std::string, std::pair<std::string, std::string>> files_;  // name -> (type, content)
};

}  // namespace elasticdl::dashboard

#endif  // ELASTICDL_DASHBOARD_SERVER_H_
