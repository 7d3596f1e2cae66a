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

TEST(DatabaseOpenTest, AnUnknownSchemesPasswordIsNotShown) {
  StatusOr<std::unique_ptr<Database>> db = Database::Open("mysql://a:S3cretPW@h/db");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(db.status().message(), HasSubstr("unknown database URL 'mysql://a:***@h/db'"));
  EXPECT_THAT(db.status().message(), Not(HasSubstr("S3cretPW")));
  EXPECT_EQ(RedactedUrl("MySQL+tcp://a:S3cretPW@h/db"), "MySQL+tcp://a:***@h/db");
}

TEST(DatabaseOpenTest, SchemesAreCaseInsensitive) {
  // Taken as PostgreSQL (and the password hidden): libpq refuses the URL
  // while parsing it, before any connection.
  for (const char* url :
       {"PostgreSQL://alice:50%zzS3cretPW@db/x", "POSTGRES://alice:50%zzS3cretPW@db/x"}) {
    StatusOr<std::unique_ptr<Database>> db = Database::Open(url);
    ASSERT_FALSE(db.ok()) << url;
    EXPECT_THAT(db.status().message(), HasSubstr("cannot connect to PostgreSQL at "));
    EXPECT_THAT(db.status().message(), HasSubstr("://alice:***@db/x")) << db.status();
    EXPECT_THAT(db.status().message(), Not(HasSubstr("S3cretPW"))) << db.status();
  }
  StatusOr<std::unique_ptr<Database>> split =
      Database::Open("PostgreSQL://alice:p@ssS3cretPW@db/x");
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("must be percent-encoded"));
  EXPECT_THAT(split.status().message(), Not(HasSubstr("S3cretPW")));
  StatusOr<std::unique_ptr<Database>> sqlite = Database::Open("SQLite:///no/such/file.db");
  ASSERT_FALSE(sqlite.ok());
  EXPECT_EQ(sqlite.status().code(), absl::StatusCode::kNotFound) << sqlite.status();
  EXPECT_THAT(sqlite.status().message(), HasSubstr("no SQLite database at /no/such/file.db"));
}

TEST(PostgresIdentifierTest, ANameLongerThanPostgresKeepsIsRefused) {
  EXPECT_TRUE(CheckPostgresIdentifier(std::string(63, 'a')).ok());
  EXPECT_TRUE(CheckPostgresIdentifier("model").ok());
  const std::string longer = std::string(63, 'a') + "_first";
  Status refused = CheckPostgresIdentifier(longer);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("'" + longer + "'"));
  EXPECT_THAT(refused.message(), HasSubstr("69 bytes"));
  EXPECT_THAT(refused.message(), HasSubstr("63 bytes"));
  // Bytes, not characters: 32 two-byte characters are 64 bytes.
  std::string accented;
  for (int i = 0; i < 32; ++i) accented += "\xc3\xa9";
  EXPECT_FALSE(CheckPostgresIdentifier(accented).ok());
}

}  // namespace
}  // namespace elasticdl::sql
