#include "common/crc.h"

#include <gtest/gtest.h>

#include <string>

namespace elasticdl::crc {
namespace {

TEST(CrcTest, StandardCheckValues) {
  EXPECT_EQ(Crc32Ieee("123456789"), 0xCBF43926u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32Ieee(""), 0u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(CrcTest, ExtendEqualsWhole) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  std::string_view v(data);
  EXPECT_EQ(Crc32cExtend(Crc32c(v.substr(0, 12345)), v.substr(12345)), Crc32c(v));
}

TEST(CrcTest, MaskRoundTripsAndChangesValue) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc(MaskCrc(c)), c);
    EXPECT_NE(MaskCrc(c), c);
  }
}

}  // namespace
}  // namespace elasticdl::crc
