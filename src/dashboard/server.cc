#include "dashboard/server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include "common/file.h"
#include "common/secret.h"
#include "common/strings.h"
#include "common/wall_time.h"

namespace elasticdl::dashboard {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kCookie[] = "elasticdl_session";

// A secret offered equals ours (never an empty one).
bool SameSecret(const std::string& a, const std::string& b) {
  return !a.empty() && ConstantTimeEquals(a, b);
}

const char* ContentType(const std::string& name) {
  const std::string ext = fs::path(name).extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".json") return "application/json";
  return "application/octet-stream";
}

// ?since=N: a count of items already seen; absent is 0.
bool ParseSince(const char* value, size_t* since) {
  *since = 0;
  if (value == nullptr) return true;
  const char* end = value + std::strlen(value);
  auto [ptr, ec] = std::from_chars(value, end, *since);
  return ec == std::errc() && ptr == end && ptr != value;
}

std::string Lookup(MHD_Connection* connection, MHD_ValueKind kind, const char* key) {
  const char* value = MHD_lookup_connection_value(connection, kind, key);
  return value == nullptr ? "" : value;
}

}  // namespace

// libmicrohttpd's callback for a request.
class RequestHandler {
 public:
  static MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* version, const char* upload_data,
                           size_t* upload_data_size, void** request_state);
};

std::string WebDir() { return InstalledShareDir("web"); }

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, const JobView* view) {
  if (options.token.empty()) return absl::InvalidArgumentError("the dashboard needs a job token");
  if (options.tls_certificate.empty() != options.tls_private_key.empty()) {
    return absl::InvalidArgumentError("the dashboard needs both a certificate and its key");
  }
  std::unique_ptr<Server> server(new Server());
  server->token_ = options.token;
  server->tls_ = !options.tls_certificate.empty();
  server->tls_certificate_ = options.tls_certificate;
  server->tls_private_key_ = options.tls_private_key;
  if (server->tls_ && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return absl::FailedPreconditionError(
        "this libmicrohttpd has no TLS: the dashboard cannot serve HTTPS");
  }
  const std::string web_dir = options.web_dir.empty() ? WebDir() : options.web_dir;
  std::error_code ec;
  for (fs::directory_iterator it(web_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string name = it->path().filename().string();
    if (name.front() == '.') continue;
    EDL_ASSIGN_OR_RETURN(std::string content, ReadFileToString(it->path().string()));
    server->files_[name] = {ContentType(name), std::move(content)};
  }
  if (server->files_.count("index.html") == 0) {
    return absl::NotFoundError(StrCat("the dashboard's web files are not in ", web_dir,
                                      " (index.html missing; scripts/setup.sh builds them)"));
  }

  server->view_ = view;

  // The address to listen on: the host's first address (IPv4 or IPv6).
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int err =
          getaddrinfo(options.host.c_str(), std::to_string(options.port).c_str(), &hints, &found);
      err != 0) {
    return absl::InvalidArgumentError(
        StrCat("the dashboard cannot listen on ", options.host, ": ", gai_strerror(err)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD;
  if (found->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (server->tls_) flags |= MHD_USE_TLS;
  // Without TLS the key and certificate options end the list.
  const MHD_OPTION tls_key = server->tls_ ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END;
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &RequestHandler::Handle, server.get(),  //
      MHD_OPTION_SOCK_ADDR, found->ai_addr,                               //
      MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,                             //
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned int>(std::max(options.threads, 1)),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned int>(std::max(options.max_connections, 1)),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned int>(std::max(options.idle_timeout_s, 1)),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, options.connection_memory,  //
      tls_key, server->tls_private_key_.c_str(),                      //
      MHD_OPTION_HTTPS_MEM_CERT, server->tls_certificate_.c_str(),    //
      MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(StrCat("the dashboard cannot listen on ", options.host, ":",
                                         options.port, " (in use, or not this host's address)"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  const int port = info != nullptr ? info->port : options.port;
  const char* scheme = server->tls_ ? "https://" : "http://";
  server->url_ = found->ai_family == AF_INET6 && options.host.find(':') != std::string::npos
                     ? StrCat(scheme, "[", options.host, "]:", port)
                     : StrCat(scheme, options.host, ":", port);
  return server;
}

struct Server::Reply {
  int status = 200;
  std::string type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static Reply Json(const json& body) {
    return {200, "application/json", body.dump(), {{"Cache-Control", "no-store"}}};
  }
  static Reply Error(int status, const std::string& message) {
    return {status, "application/json", json{{"error", message}}.dump(), {}};
  }
};

MHD_Result RequestHandler::Handle(void* cls, MHD_Connection* connection, const char* url,
                                  const char* method, const char* /*version*/,
                                  const char* /*upload_data*/, size_t* /*upload_data_size*/,
                                  void** /*request_state*/) {
  // Answered at the first call, when the head has been read: a body, if
  // any, is not read (none is wanted) and the connection is closed after.
  // A C callback: nothing may escape it. A request that throws (a bug) is
  // answered 500 and the server goes on.
  Server::Reply reply;
  try {
    reply = static_cast<Server*>(cls)->Answer(connection, method, url);
  } catch (const std::exception& e) {
    spdlog::error("dashboard: {} {}: {}", method, url, e.what());
    reply = Server::Reply::Error(500, "internal error");
  }
  MHD_Response* response = MHD_create_response_from_buffer(
      reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.type.c_str());
  // The page loads only its own files and is shown in no other site's frame;
  // a type is never guessed; the login link's code does not leave in a
  // Referer.
  MHD_add_response_header(response, "Content-Security-Policy",
                          "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  MHD_add_response_header(response, "X-Frame-Options", "DENY");
  MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
  for (const auto& [name, value] : reply.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection, reply.status, response);
  MHD_destroy_response(response);
  return queued;
}

StatusOr<std::string> Server::NewLoginUrl() {
  EDL_ASSIGN_OR_RETURN(std::string code, RandomHex(32));
  std::lock_guard<std::mutex> lock(mu_);
  login_codes_.push_back(code);
  if (login_codes_.size() > kMaxLoginCodes) login_codes_.pop_front();
  return StrCat(url_, "/?login=", code);
}

std::string Server::Login(const std::string& code) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(login_codes_.begin(), login_codes_.end(),
                         [&](const std::string& c) { return SameSecret(c, code); });
  if (it == login_codes_.end()) return "";
  login_codes_.erase(it);
  StatusOr<std::string> session = RandomHex(32);
  if (!session.ok()) return "";
  sessions_.push_back(*session);
  if (sessions_.size() > kMaxSessions) sessions_.pop_front();
  return *session;
}

bool Server::Authorized(MHD_Connection* connection) {
  if (std::string auth = Lookup(connection, MHD_HEADER_KIND, "Authorization");
      auth.rfind("Bearer ", 0) == 0) {
    return SameSecret(auth.substr(7), token_);
  }
  const std::string session = Lookup(connection, MHD_COOKIE_KIND, kCookie);
  if (session.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(sessions_.begin(), sessions_.end(),
                     [&](const std::string& s) { return SameSecret(s, session); });
}

Server::Reply Server::Answer(MHD_Connection* connection, const std::string& method,
                             const std::string& path) {
  // Every request: the method, then a login, a session or the token.
  if (method != "GET" && method != "HEAD") {
    Reply reply = Reply::Error(405, StrCat("method ", method, " not allowed"));
    reply.headers.emplace_back("Allow", "GET, HEAD");
    return reply;
  }
  if (const char* code = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "login");
      code != nullptr && path == "/") {
    const std::string session = Login(code);
    if (session.empty()) {
      return Reply::Error(401,
                          "this login link was used already, or is not this job's: "
                          "`elasticdl job status JOB_DIR` prints a new one");
    }
    // On to the page, the code gone from the address bar and the history.
    Reply reply{303, "text/plain; charset=utf-8", "", {{"Location", "/"}}};
    reply.headers.emplace_back("Set-Cookie",
                               StrCat(kCookie, "=", session, "; Path=/; HttpOnly; SameSite=Strict",
                                      tls_ ? "; Secure" : ""));
    return reply;
  }
  if (!Authorized(connection)) {
    Reply reply = Reply::Error(
        401,
        "not logged in: open the login link `elasticdl job status JOB_DIR` prints, or send "
        "Authorization: Bearer TOKEN (the job's token)");
    reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"elasticdl\"");
    return reply;
  }

  Reply reply;
  size_t since = 0;
  const char* since_value = MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, "since");
  if (path == "/") {
    reply = File("index.html");
  } else if (constexpr std::string_view kStatic = "/static/"; path.rfind(kStatic, 0) == 0) {
    // Names only: no directories, so nothing outside the web directory.
    const std::string name = path.substr(kStatic.size());
    reply = name.find('/') == std::string::npos ? File(name)
                                                : Reply::Error(404, "no such file: " + name);
  } else if (path == "/api/job") {
    reply = Reply::Json(view_->Job(WallSeconds()));
  } else if ((path == "/api/curves" || path == "/api/events") && !ParseSince(since_value, &since)) {
    reply = Reply::Error(400, "since must be a count");
  } else if (path == "/api/curves") {
    reply = Reply::Json(view_->Curves(since));
  } else if (path == "/api/events") {
    reply = Reply::Json(view_->Events(since));
  } else if (path == "/metrics") {
    reply = {200, "text/plain; version=0.0.4; charset=utf-8", view_->Metrics(WallSeconds()), {}};
  } else {
    reply = Reply::Error(404, StrCat("HTTP 404 for ", path));
  }
  return reply;
}

Server::Reply Server::File(const std::string& name) const {
  auto it = files_.find(name);
  if (it == files_.end()) return Reply::Error(404, StrCat("no such file: ", name));
  return {200, it->second.first, it->second.second, {{"Cache-Control", "no-cache"}}};
}

void Server::Stop() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

Server::~Server() { Stop(); }

}  // namespace elasticdl::dashboard
