#include "common/compression.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

namespace elasticdl::compression {
namespace {

using ::testing::HasSubstr;

std::string Mixed(size_t n) {
  std::mt19937 rng(42);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = (i / 1000) % 2 ? static_cast<char>(rng()) : 'a';
  return s;
}

TEST(SnappyFramedTest, RoundTripsAcrossBlockBoundaries) {
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{300000}}) {
    std::string input = Mixed(n), framed, back;
    SnappyFramedCompress(input, &framed);
    ASSERT_TRUE(SnappyFramedUncompress(framed, 1 << 30, &back).ok()) << n;
    EXPECT_EQ(back, input) << n;
  }
}

TEST(SnappyFramedTest, StartsWithStreamIdentifier) {
  std::string framed;
  SnappyFramedCompress("hello", &framed);
  EXPECT_EQ(framed.substr(0, 10), std::string("\xff\x06\x00\x00sNaPpY", 10));
}

TEST(SnappyFramedTest, DetectsCorruption) {
  std::string framed, out;
  SnappyFramedCompress(Mixed(5000), &framed);
  framed[framed.size() - 3] ^= 0x40;
  Status s = SnappyFramedUncompress(framed, 1 << 30, &out);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
}

TEST(SnappyFramedTest, RejectsMissingIdentifierTruncationAndReservedChunks) {
  std::string out;
  EXPECT_THAT(SnappyFramedUncompress(std::string("\x01\x05\x00\x00\x00\x00\x00\x00x", 9), 100, &out)
                  .message(),
              HasSubstr("missing stream identifier"));
  std::string framed;
  SnappyFramedCompress("hello world", &framed);
  EXPECT_THAT(SnappyFramedUncompress(framed.substr(0, framed.size() - 1), 100, &out).message(),
              HasSubstr("truncated"));
  std::string reserved = framed + std::string("\x02\x00\x00\x00", 4);
  EXPECT_THAT(SnappyFramedUncompress(reserved, 100, &out).message(),
              HasSubstr("reserved unskippable"));
  std::string skippable = framed + std::string("\x80\x01\x00\x00z\xfe\x00\x00\x00", 9);
  out.clear();
  ASSERT_TRUE(SnappyFramedUncompress(skippable, 100, &out).ok());
  EXPECT_EQ(out, "hello world");
}

TEST(SnappyFramedTest, EnforcesOutputLimit) {
  std::string framed, out;
  SnappyFramedCompress(std::string(200000, 'z'), &framed);
  EXPECT_THAT(SnappyFramedUncompress(framed, 100000, &out).message(), HasSubstr("limit"));
}

TEST(SnappyFramedTest, LimitCountsOnlyThisCallsOutputAndErrorsLeaveOutputAlone) {
  std::string framed, out = std::string(1000, 'p');
  SnappyFramedCompress(std::string(500, 'z'), &framed);
  ASSERT_TRUE(SnappyFramedUncompress(framed, 500, &out).ok());
  EXPECT_EQ(out, std::string(1000, 'p') + std::string(500, 'z'));
  out = "keep";
  framed[14] ^= 1;  // the chunk's checksum
  EXPECT_FALSE(SnappyFramedUncompress(framed, 500, &out).ok());
  EXPECT_EQ(out, "keep");
}

TEST(GzipTest, RoundTripsAndConcatenatedMembers) {
  std::string a = Mixed(100000), b = "tail", ga, gb, out;
  ASSERT_TRUE(GzipCompress(a, &ga).ok());
  ASSERT_TRUE(GzipCompress(b, &gb).ok());
  ASSERT_TRUE(GzipUncompress(ga + gb, 1 << 30, &out).ok());
  EXPECT_EQ(out, a + b);
}

TEST(GzipTest, DetectsTruncationCorruptionAndLimit) {
  std::string g, out;
  ASSERT_TRUE(GzipCompress(Mixed(100000), &g).ok());
  EXPECT_THAT(GzipUncompress(g.substr(0, g.size() / 2), 1 << 30, &out).message(),
              HasSubstr("truncated"));
  std::string bad = g;
  bad[bad.size() - 6] ^= 1;  // inside the CRC-32 trailer
  EXPECT_EQ(GzipUncompress(bad, 1 << 30, &out).code(), StatusCode::kDataLoss);
  EXPECT_THAT(GzipUncompress(g, 1000, &out).message(), HasSubstr("limit"));
  EXPECT_EQ(GzipUncompress("", 1000, &out).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace elasticdl::compression
