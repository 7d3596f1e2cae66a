#include "sql/database.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace elasticdl::sql {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RedactedUrlTest, HidesThePasswordOfTheUserInformation) {
  EXPECT_EQ(RedactedUrl("postgresql://alice:s3cret@db.example:5432/sales"),
            "postgresql://alice:***@db.example:5432/sales");
  EXPECT_EQ(RedactedUrl("postgres://alice:a:b@db/sales"), "postgres://alice:***@db/sales");
}

TEST(RedactedUrlTest, HidesAPasswordGivenAsASetting) {
  EXPECT_EQ(RedactedUrl("postgresql://alice@db/sales?password=s3cret"),
            "postgresql://alice@db/sales?password=***");
  EXPECT_EQ(RedactedUrl("postgres://db/sales?user=alice&password=s3cret&sslmode=require"),
            "postgres://db/sales?user=alice&password=***&sslmode=require");
  EXPECT_EQ(RedactedUrl(R"(host=db user=alice password='it\'s secret' dbname=sales)"),
            "host=db user=alice password=*** dbname=sales");
  EXPECT_EQ(RedactedUrl("host=db password = s3cret dbname=sales"),
            "host=db password = *** dbname=sales");
}

TEST(RedactedUrlTest, LeavesUrlsWithoutAPasswordAlone) {
  for (const char* url : {"postgresql://alice@db:5432/sales", "sqlite:///data/a@b:c.db",
                          "sqlite://relative.db", "postgresql://db/sales?user=alice"}) {
    EXPECT_EQ(RedactedUrl(url), url);
  }
}

TEST(DatabaseOpenTest, AnUnknownSchemeIsRefusedWithoutShowingThePassword) {
  StatusOr<std::unique_ptr<Database>> db = Database::Open("host=db password=s3cret");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(db.status().message(), HasSubstr("password=***"));
  EXPECT_THAT(db.status().message(), Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace elasticdl::sql
