#include "dashboard/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>

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

TEST_F(ServerTest, TheTokenInTheQuerySetsACookieThatLaterRequestsCarry) {
  auto res = Get("/?token=" + kToken);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "<html>dashboard</html>");
  const std::string cookie = res->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("elasticdl_token=" + kToken));
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  auto api = Get("/api/job", {{"Cookie", "other=1; elasticdl_token=" + kToken}});
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 200);
  EXPECT_EQ(nlohmann::json::parse(api->body)["job"], "job-s");
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

TEST_F(ServerTest, NoTokenOrAWrongOneIsRefusedEverywhere) {
  for (const std::string path : {"/", "/api/job", "/metrics", "/static/dashboard.js", "/nope"}) {
    auto none = Get(path);
    ASSERT_TRUE(none) << path;
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_THAT(none->get_header_value("WWW-Authenticate"), HasSubstr("Bearer"));
    EXPECT_THAT(none->body, HasSubstr("missing"));
    auto wrong = Get(path, Bearer(std::string(64, 'x')));
    ASSERT_TRUE(wrong) << path;
    EXPECT_EQ(wrong->status, 401) << path;
    EXPECT_THAT(wrong->body, HasSubstr("wrong job token"));
    auto prefix = Get(path + "?token=" + kToken.substr(0, 10));
    ASSERT_TRUE(prefix) << path;
    EXPECT_EQ(prefix->status, 401) << path;
  }
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
