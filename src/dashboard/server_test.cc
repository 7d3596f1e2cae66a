#include "dashboard/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <vector>

#include "rpc/job_credentials.h"
#include "testing/temp_dir.h"

namespace elasticdl::dashboard {
namespace {

using ::testing::HasSubstr;

const std::string kToken(64, 'k');

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(web_.File("index.html")) << "<html>dashboard</html>";
    std::ofstream(web_.File("dashboard.js")) << "poll();";
    std::ofstream(secret_.File("job.pbtxt")) << "secret";
    view_.Apply({{"t", 1.0}, {"event", "master_started"}});
    ServerOptions options;
    options.token = kToken;
    options.web_dir = web_.path();
    auto server = Server::Start(options, &view_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    const std::string url = server_->url();
    client_ = std::make_unique<httplib::Client>(url);
  }

  httplib::Result Get(const std::string& path, httplib::Headers headers = {}) {
    return client_->Get(path, headers);
  }
  httplib::Headers Bearer(const std::string& token = kToken) {
    return {{"Authorization", "Bearer " + token}};
  }

  testing::TempDir web_;
  testing::TempDir secret_;
  JobView view_{JobViewOptions{"job-s"}, nullptr};
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

// The path and query of a login link.
std::string PathOf(const std::string& url) { return url.substr(url.find("/?login=")); }

TEST_F(ServerTest, ALoginLinkWorksOnceAndLeavesASessionCookie) {
  StatusOr<std::string> login = server_->NewLoginUrl();
  ASSERT_TRUE(login.ok()) << login.status();
  EXPECT_EQ(login->rfind(server_->url() + "/?login=", 0), 0u) << *login;
  EXPECT_THAT(*login, ::testing::Not(HasSubstr(kToken)));
  auto res = Get(PathOf(*login));
  ASSERT_TRUE(res);
  // On to the page, without the code.
  EXPECT_EQ(res->status, 303);
  EXPECT_EQ(res->get_header_value("Location"), "/");
  const std::string cookie = res->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("elasticdl_session="));
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
  const std::string session = cookie.substr(0, cookie.find(';'));
  auto page = Get("/", {{"Cookie", "other=1; " + session}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, "<html>dashboard</html>");
  EXPECT_THAT(page->get_header_value("Content-Security-Policy"),
              HasSubstr("frame-ancestors 'none'"));
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(page->get_header_value("Referrer-Policy"), "no-referrer");
  auto api = Get("/api/job", {{"Cookie", session}});
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  EXPECT_EQ(nlohmann::json::parse(api->body)["job"], "job-s");
  // The link is spent.
  auto again = Get(PathOf(*login));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 401);
  EXPECT_THAT(again->body, HasSubstr("used already"));
  // Programs send the token.
  auto metrics = Get("/metrics", Bearer());
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->get_header_value("Content-Type"), HasSubstr("text/plain; version=0.0.4"));
  EXPECT_THAT(metrics->body, HasSubstr("elasticdl_up{job=\"job-s\",role=\"master\"} 1"));
  auto js = Get("/static/dashboard.js", Bearer());
  ASSERT_TRUE(js);
  EXPECT_EQ(js->body, "poll();");
  EXPECT_THAT(js->get_header_value("Content-Type"), HasSubstr("text/javascript"));
}

TEST_F(ServerTest, WithoutALoginOrTheTokenEverythingIsRefused) {
  const std::string forged(64, 'f');
  for (const std::string path : {"/", "/api/job", "/metrics", "/static/dashboard.js", "/nope"}) {
    auto none = Get(path);
    ASSERT_TRUE(none) << path;
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_EQ(none->get_header_value("X-Frame-Options"), "DENY") << path;
    EXPECT_THAT(none->get_header_value("WWW-Authenticate"), HasSubstr("Bearer"));
    EXPECT_THAT(none->body, HasSubstr("not logged in"));
    auto wrong = Get(path, Bearer(std::string(64, 'x')));
    ASSERT_TRUE(wrong) << path;
    EXPECT_EQ(wrong->status, 401) << path;
    auto cookie = Get(path, {{"Cookie", "elasticdl_session=" + forged}});
    ASSERT_TRUE(cookie) << path;
    EXPECT_EQ(cookie->status, 401) << path;
    // The token is not a login, in the query or as a cookie.
    auto query = Get(path + "?token=" + kToken);
    ASSERT_TRUE(query) << path;
    EXPECT_EQ(query->status, 401) << path;
    auto token_cookie = Get(path, {{"Cookie", "elasticdl_session=" + kToken}});
    ASSERT_TRUE(token_cookie) << path;
    EXPECT_EQ(token_cookie->status, 401) << path;
  }
  auto guessed = Get("/?login=" + forged);
  ASSERT_TRUE(guessed);
  EXPECT_EQ(guessed->status, 401);
  EXPECT_TRUE(guessed->get_header_value("Set-Cookie").empty());
}

TEST_F(ServerTest, OnlyTheNewestLoginLinksAreKept) {
  std::vector<std::string> links;
  for (size_t i = 0; i <= Server::kMaxLoginCodes; ++i) links.push_back(*server_->NewLoginUrl());
  auto oldest = Get(PathOf(links.front()));
  ASSERT_TRUE(oldest);
  EXPECT_EQ(oldest->status, 401);
  auto newest = Get(PathOf(links.back()));
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->status, 303);
}

TEST_F(ServerTest, UnknownPathsAndFilesOutsideTheWebDirectoryAreNotFound) {
  const std::string up = "../" + std::filesystem::path(secret_.path()).filename().string();
  const std::vector<std::string> paths = {"/nope",
                                          "/api/nope",
                                          "/static/missing.js",
                                          "/static/" + up + "/job.pbtxt",
                                          "/static/%2e%2e%2fjob.pbtxt",
                                          "/static/..%2fjob.pbtxt",
                                          "/static/",
                                          "/static/.stamp",
                                          "/" + up + "/job.pbtxt"};
  for (const std::string& path : paths) {
    auto res = Get(path, Bearer());
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 404) << path;
    EXPECT_THAT(res->body, ::testing::Not(HasSubstr("secret"))) << path;
  }
}

TEST_F(ServerTest, OnlyGetAndHeadAreServed) {
  auto post = client_->Post("/api/job", Bearer(), "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  auto head = client_->Head("/api/job", Bearer());
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
}

TEST_F(ServerTest, BadQueriesAndHugeHeadersAreRefusedAndTheServerGoesOn) {
  auto bad = Get("/api/curves?since=abc", Bearer());
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto negative = Get("/api/events?since=-1", Bearer());
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->status, 400);
  // One header longer than a connection's buffer, and many short ones adding
  // up to more: both refused as too large before anything grows.
  httplib::Headers huge = Bearer();
  huge.emplace("X-Huge", std::string(64 * 1024, 'h'));
  auto res = Get("/api/job", huge);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 431);
  httplib::Headers many = Bearer();
  for (int i = 0; i < 5000; ++i) many.emplace("X-" + std::to_string(i), "a");
  res = Get("/api/job", many);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 431);
  auto after = Get("/api/job", Bearer());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST(ServerTlsTest, WithACertificateItServesHttpsOnly) {
  testing::TempDir web;
  std::ofstream(web.File("index.html")) << "<html>dashboard</html>";
  JobView view({"j"}, nullptr);
  StatusOr<rpc::JobCredentials> job = rpc::GenerateJobCredentials();
  ASSERT_TRUE(job.ok()) << job.status();
  ServerOptions options;
  options.token = job->token;
  options.web_dir = web.path();
  options.tls_certificate = job->certificate;
  options.tls_private_key = job->private_key;
  auto server = Server::Start(options, &view);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string url = (*server)->url();
  ASSERT_EQ(url.rfind("https://127.0.0.1:", 0), 0u) << url;
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  httplib::SSLClient tls("127.0.0.1", port);
  tls.enable_server_certificate_verification(false);
  auto res = tls.Get("/?login=" + PathOf(*(*server)->NewLoginUrl()).substr(8));
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 303);
  EXPECT_THAT(res->get_header_value("Set-Cookie"), HasSubstr("; Secure"));
  auto api = tls.Get("/api/job", {{"Authorization", "Bearer " + job->token}});
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  // Plain HTTP to that port gets no answer.
  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(2);
  auto refused = plain.Get("/api/job", {{"Authorization", "Bearer " + job->token}});
  EXPECT_TRUE(!refused || refused->status != 200);
}

TEST(ServerStartTest, WithoutTheWebFilesItSaysWhereItLooked) {
  testing::TempDir empty;
  JobView view({"j"}, nullptr);
  ServerOptions options;
  options.token = kToken;
  options.web_dir = empty.path();
  auto server = Server::Start(options, &view);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr(empty.path()));
}

}  // namespace
}  // namespace elasticdl::dashboard
