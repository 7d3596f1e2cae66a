#include "data/criteo_synth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "testing/temp_dir.h"

namespace elasticdl {
namespace {

using ::testing::AllOf;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Le;

TEST(ExactAucTest, HandCheckedExamples) {
  // Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs ordered.
  EXPECT_DOUBLE_EQ(*ExactAuc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);
  // Ties count a half: the positive 0.5 ties both negatives (1 pair in all),
  // the positive 0.9 beats both (2 pairs): 3 of 4.
  EXPECT_DOUBLE_EQ(*ExactAuc({0.5, 0.5, 0.5, 0.9}, {1, 0, 0, 1}), 0.75);
  // Positive 2 beats negative 1, ties negative 2, loses to negative 3; positive
  // 4 beats all three: (1 + 0.5 + 3) / 6.
  EXPECT_DOUBLE_EQ(*ExactAuc({1, 2, 2, 3, 4}, {0, 1, 0, 0, 1}), 0.75);
  EXPECT_DOUBLE_EQ(*ExactAuc({0.3, 0.3, 0.3}, {1, 0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(*ExactAuc({0.9, 0.1}, {0, 1}), 0.0);
  EXPECT_DOUBLE_EQ(*ExactAuc({0.1, 0.9, 0.2, 0.7}, {0, 1, 0, 1}), 1.0);
  EXPECT_FALSE(ExactAuc({0.1, 0.2}, {1, 1}).has_value());
  EXPECT_FALSE(ExactAuc({}, {}).has_value());
}

TEST(CriteoSynthVocabularyTest, ShapedLikeCriteo) {
  auto v = CriteoSynthVocabulary(1);
  uint64_t total = 0;
  for (uint64_t n : v) total += n;
  EXPECT_THAT(total, AllOf(Ge(300000u), Le(1000000u)));
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 3u);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 120000u);
  auto tiny = CriteoSynthVocabulary(0.001);
  EXPECT_EQ(tiny[8], 1u);    // C9: 3 values become 1
  EXPECT_EQ(tiny[2], 120u);  // C3
}

class CriteoSynthTest : public ::testing::Test {
 protected:
  CriteoSynthOptions Options(const std::string& name, uint64_t records, uint64_t seed = 7) {
    CriteoSynthOptions options;
    options.output = dir_.File(name);
    options.records = records;
    options.seed = seed;
    return options;
  }
  std::string Read(const std::string& path) {
    auto s = ReadFileToString(path);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : "";
  }

  testing::TempDir dir_;
};

TEST_F(CriteoSynthTest, SameSeedSameBytes) {
  ASSERT_TRUE(SynthesizeCriteo(Options("a.tsv", 3000)).ok());
  ASSERT_TRUE(SynthesizeCriteo(Options("b.tsv", 3000)).ok());
  ASSERT_TRUE(SynthesizeCriteo(Options("c.tsv", 3000, /*seed=*/8)).ok());
  std::string a = Read(dir_.File("a.tsv"));
  EXPECT_EQ(a.size(), Read(dir_.File("b.tsv")).size());
  EXPECT_TRUE(a == Read(dir_.File("b.tsv")));
  EXPECT_FALSE(a == Read(dir_.File("c.tsv")));
  auto truth_a = nlohmann::json::parse(Read(dir_.File("a.tsv.truth.json")));
  auto truth_b = nlohmann::json::parse(Read(dir_.File("b.tsv.truth.json")));
  truth_a.erase("file");
  truth_b.erase("file");
  EXPECT_EQ(truth_a, truth_b);
  // A longer file starts with the same lines.
  ASSERT_TRUE(SynthesizeCriteo(Options("d.tsv", 4000)).ok());
  EXPECT_EQ(Read(dir_.File("d.tsv")).substr(0, a.size()), a);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("a.tsv.partial")));
}

TEST_F(CriteoSynthTest, LinesParseAndLookLikeCriteo) {
  auto truths = SynthesizeCriteo(Options("s.tsv", 5000));
  ASSERT_TRUE(truths.ok()) << truths.status();
  uint64_t lines = 0, clicks = 0, negative_i2 = 0, missing_i1 = 0, missing_c20 = 0;
  ASSERT_TRUE(ForEachLine(dir_.File("s.tsv"), [&](uint64_t n, std::string_view line) {
                CriteoRecord r;
                EDL_RETURN_IF_ERROR(ParseCriteoLine(line, "s.tsv", n, &r));
                ++lines;
                clicks += r.label;
                negative_i2 += r.integers[1].has_value() && *r.integers[1] < 0;
                missing_i1 += !r.integers[0].has_value();
                missing_c20 += r.categories[19].empty();
                for (std::string_view c : r.categories) {
                  if (c.empty()) continue;
                  EXPECT_EQ(c.size(), 8u);
                  EXPECT_EQ(c.find_first_not_of("0123456789abcdef"), std::string_view::npos);
                }
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(lines, 5000u);
  EXPECT_EQ(clicks, (*truths)[0].clicks);
  EXPECT_THAT(negative_i2, AllOf(Ge(40u), Le(180u)));     // 2%
  EXPECT_THAT(missing_i1, AllOf(Ge(2000u), Le(2500u)));   // 45%
  EXPECT_THAT(missing_c20, AllOf(Ge(2000u), Le(2400u)));  // 44%
  const CriteoSynthTruth& t = (*truths)[0];
  EXPECT_EQ(t.distinct[8], 3u);  // C9's three values all occur
  for (int f = 0; f < kCriteoCategoricalFeatures; ++f) EXPECT_LE(t.distinct[f], t.vocabulary[f]);
  // Zipf: the big fields' 5000 draws hit far fewer than 5000 values.
  EXPECT_LT(t.distinct[2], 3000u);
}

TEST_F(CriteoSynthTest, ClickRateAndOptimumInRange) {
  CriteoSynthOptions options = Options("train.tsv", 40000, /*seed=*/1);
  options.test_output = dir_.File("test.tsv");
  options.test_records = 10000;
  auto truths = SynthesizeCriteo(options);
  ASSERT_TRUE(truths.ok()) << truths.status();
  ASSERT_EQ(truths->size(), 2u);
  for (const CriteoSynthTruth& t : *truths) {
    EXPECT_THAT(t.click_rate, AllOf(Ge(0.2), Le(0.3))) << t.file;
    ASSERT_TRUE(t.optimum_auc.has_value());
    EXPECT_THAT(*t.optimum_auc, AllOf(Ge(0.72), Le(0.88))) << t.file;
    EXPECT_LT(t.optimum_log_loss, t.constant_log_loss);
    auto json = nlohmann::json::parse(Read(t.truth_file));
    EXPECT_EQ(json["records"], t.records);
    EXPECT_EQ(json["clicks"], t.clicks);
    EXPECT_DOUBLE_EQ(json["click_rate"].get<double>(), t.click_rate);
    EXPECT_DOUBLE_EQ(json["optimum_auc"].get<double>(), *t.optimum_auc);
    EXPECT_DOUBLE_EQ(json["optimum_log_loss"].get<double>(), t.optimum_log_loss);
    EXPECT_EQ(json["categorical"]["C3"]["vocabulary"], 120000);
    EXPECT_EQ(json["categorical"]["C9"]["distinct"], 3);
  }
  EXPECT_EQ((*truths)[1].records, 10000u);
  EXPECT_EQ((*truths)[1].truth_file, dir_.File("test.tsv.truth.json"));
  // The held-out lines are other draws, not a copy of the first ones.
  EXPECT_NE(Read(dir_.File("test.tsv")), Read(dir_.File("train.tsv")).substr(0, 10000));

  // A weaker signal gives a lower optimum; the click rate follows the target.
  options.logit_stddev = 0.5;
  options.click_rate = 0.1;
  options.test_records = 0;
  options.test_output.clear();
  truths = SynthesizeCriteo(options);
  ASSERT_TRUE(truths.ok());
  EXPECT_THAT((*truths)[0].click_rate, AllOf(Ge(0.08), Le(0.12)));
  EXPECT_THAT(*(*truths)[0].optimum_auc, AllOf(Ge(0.55), Le(0.68)));
}

TEST_F(CriteoSynthTest, RejectsBadOptions) {
  auto message = [](const CriteoSynthOptions& o) {
    return std::string(SynthesizeCriteo(o).status().message());
  };
  CriteoSynthOptions o = Options("x.tsv", 10);
  o.records = 0;
  EXPECT_EQ(message(o), "--records must be positive");
  o = Options("x.tsv", 10);
  o.test_records = 5;
  EXPECT_EQ(message(o), "--test_records and --test_output go together");
  o = Options("x.tsv", 10);
  o.click_rate = 1;
  EXPECT_THAT(message(o), HasSubstr("--click_rate"));
  o = Options("x.tsv", 10);
  o.vocabulary_scale = 1e6;
  EXPECT_THAT(message(o), HasSubstr("at most 2^32"));
  o = Options("x.tsv", 10);
  o.zipf = 0;
  EXPECT_THAT(message(o), HasSubstr("--zipf"));
  // Missing directories are made; one that cannot be (a file is in the
  // way) is named.
  o = Options("made/here/x.tsv", 10);
  EXPECT_EQ(message(o), "");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.File("made/here/x.tsv")));
  std::ofstream(dir_.File("a_file")) << "in the way";
  o = Options("a_file/x.tsv", 10);
  EXPECT_THAT(message(o), HasSubstr("a_file"));
}

}  // namespace
}  // namespace elasticdl
