#include "elasticdl/zoo/params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParamsTest, ParsesSeed003Params) {
  auto params = Params::Parse("hidden_units=[10, 100, 20, 5], learning_rate=0.01");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->get<std::vector<int>>("hidden_units"), (std::vector<int>{10, 100, 20, 5}));
  EXPECT_DOUBLE_EQ(params->get<double>("learning_rate"), 0.01);
  EXPECT_FLOAT_EQ(params->get<float>("learning_rate"), 0.01f);
  EXPECT_EQ(params->get<int>("missing", 3), 3);
}

TEST(ParamsTest, ScalarsStringsAndLists) {
  auto params = Params::Parse(
      " a = 3 , b=-2.5e-1, c=true, d=False, e=relu, f='x, y', g=\"it's\", h=[1, 2.5],"
      " i=['p', q], j=[], k='a\\'b'");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->get<int64_t>("a"), 3);
  EXPECT_DOUBLE_EQ(params->get<double>("a"), 3.0);  // an integer reads as a double
  EXPECT_DOUBLE_EQ(params->get<double>("b"), -0.25);
  EXPECT_TRUE(params->get<bool>("c"));
  EXPECT_FALSE(params->get<bool>("d"));
  EXPECT_EQ(params->get<std::string>("e"), "relu");
  EXPECT_EQ(params->get<std::string>("f"), "x, y");
  EXPECT_EQ(params->get<std::string>("g"), "it's");
  EXPECT_EQ(params->get<std::vector<double>>("h"), (std::vector<double>{1, 2.5}));
  EXPECT_EQ(params->get<std::vector<std::string>>("i"), (std::vector<std::string>{"p", "q"}));
  EXPECT_TRUE(params->get<std::vector<std::string>>("j").empty());
  EXPECT_TRUE(params->get<std::vector<float>>("j").empty());
  EXPECT_EQ(params->get<std::string>("k"), "a'b");
  EXPECT_TRUE(Params::Parse("")->values().empty());
}

TEST(ParamsTest, ToStringReadsBackEqual) {
  auto params = Params::Parse("z=1, y=2.0, x='it\\'s', w=[1.5, 2], v=[a, 'b c'], u=false, t=1e300");
  ASSERT_TRUE(params.ok()) << params.status();
  std::string text = params->ToString();
  EXPECT_EQ(text.substr(0, 4), "t=1e");  // keys sorted
  auto again = Params::Parse(text);
  ASSERT_TRUE(again.ok()) << again.status() << " in " << text;
  EXPECT_EQ(*again, *params) << text;
  EXPECT_EQ(again->get<double>("y"), 2.0);
}

TEST(ParamsTest, SyntaxErrorsNameKeyAndColumn) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"a=1, a=2", "duplicate key at column 6 (key 'a')"},
      {"a 1", "expected '=' after the key at column 3 (key 'a')"},
      {"a=1 b=2", "expected ',' between parameters at column 5 (key 'a')"},
      {"a=[1, 2", "unterminated list"},
      {"a=[1 2]", "expected ',' or ']' in the list"},
      {"a='abc", "unterminated string"},
      {"a=[1, 'x']", "a list mixes numbers and strings"},
      {"a=[[1]]", "lists do not nest"},
      {"a=[true]", "lists hold numbers or strings"},
      {"1a=2", "expected a key at column 1"},
      {"a=", "expected a value at column 3 (key 'a')"},
      {"a=1,", "expected a key after ','"},
  };
  for (const Case& c : cases) {
    auto params = Params::Parse(c.text);
    ASSERT_FALSE(params.ok()) << c.text;
    EXPECT_EQ(params.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(params.status().message()),
                AllOf(HasSubstr("--params: "), HasSubstr(c.message)))
        << c.text;
  }
}

TEST(ParamsTest, TypeMismatchThrowsNamingKeyAndTypes) {
  auto params = Params::Parse("units=[10, 20], rate=0.5, big=9999999999");
  ASSERT_TRUE(params.ok());
  try {
    params->get<int>("rate");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--params: 'rate' is a float (0.5), expected an integer");
  }
  EXPECT_THROW(params->get<std::string>("units"), std::invalid_argument);
  EXPECT_THROW(params->get<std::vector<int>>("rate"), std::invalid_argument);
  EXPECT_THROW(params->get<int>("big"), std::invalid_argument);
  EXPECT_EQ(params->get<int64_t>("big"), 9999999999);
  try {
    params->get<double>("absent");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--params: missing required key 'absent'");
  }
}

}  // namespace
}  // namespace elasticdl
