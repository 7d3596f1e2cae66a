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

TEST(RedactedUrlTest, HidesPasswordsThatHoldSeparators) {
  EXPECT_EQ(RedactedUrl("postgresql://alice:pa/ss@db/sales"), "postgresql://alice:***@db/sales");
  EXPECT_EQ(RedactedUrl("postgresql://alice:p@ss@db/sales?sslmode=require"),
            "postgresql://alice:***@db/sales?sslmode=require");
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

TEST(DatabaseOpenTest, LibpqsOwnMessageDoesNotShowThePassword) {
  // A URL libpq refuses while parsing it, before any connection, quoting
  // the password in its message.
  StatusOr<std::unique_ptr<Database>> db = Database::Open("postgresql://alice:50%zz@db/x");
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(db.status().message(), HasSubstr("cannot connect to PostgreSQL at "
                                               "postgresql://alice:***@db/x: "));
  EXPECT_THAT(db.status().message(), Not(HasSubstr("50%zz")));
}

TEST(DatabaseOpenTest, APasswordLibpqWouldSplitIsRefusedUnshown) {
  for (const char* url : {"postgresql://alice:p@ss@db/sales", "postgresql://alice:pa/ss@db/sales",
                          "postgresql://db/sal@es"}) {
    StatusOr<std::unique_ptr<Database>> db = Database::Open(url);
    ASSERT_FALSE(db.ok()) << url;
    EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_THAT(db.status().message(), HasSubstr("must be percent-encoded (%40, %2F)")) << url;
    EXPECT_THAT(db.status().message(), Not(HasSubstr("p@ss"))) << url;
    EXPECT_THAT(db.status().message(), Not(HasSubstr(":pa/ss"))) << url;
  }
}

}  // namespace
}  // namespace elasticdl::sql
