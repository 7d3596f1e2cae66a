#include "cluster/cluster_backend.h"

#include <gtest/gtest.h>

namespace elasticdl::cluster {
namespace {

TEST(ProcessNameTest, LabelsParseBackToTheSameProcess) {
  for (const ProcessName& p :
       {ProcessName::Master(), ProcessName::Ps(PsId(0)), ProcessName::Ps(PsId(12)),
        ProcessName::Worker(WorkerId(0)), ProcessName::Worker(WorkerId(7))}) {
    EXPECT_EQ(ProcessName::Parse(p.label()), p) << p.label();
  }
  EXPECT_EQ(ProcessName::Worker(WorkerId(7)).label(), "worker-7");
  EXPECT_EQ(ProcessName::Ps(PsId(2)).ps(), PsId(2));
  EXPECT_EQ(ProcessName::Worker(WorkerId(3)).worker(), WorkerId(3));
  EXPECT_NE(ProcessName::Ps(PsId(1)), ProcessName::Worker(WorkerId(1)));
}

TEST(ProcessNameTest, AnythingElseIsNoProcess) {
  for (const char* label : {"", "master-0", "ps-", "ps-x", "ps--1", "ps-1x", "worker",
                            "worker-99999999999", "chief-0"}) {
    EXPECT_EQ(ProcessName::Parse(label), std::nullopt) << label;
  }
}

}  // namespace
}  // namespace elasticdl::cluster
