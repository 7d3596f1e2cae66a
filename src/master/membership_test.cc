#include "master/membership.h"

#include <gtest/gtest.h>

#include "testing/ids.h"

namespace elasticdl::master {
namespace {

using namespace std::chrono_literals;
using Clock = Membership::Clock;

cluster::ProcessHandle Handle(const std::string& id) {
  cluster::ProcessHandle h;
  h.backend_id = id;
  return h;
}

TEST(MembershipTest, ServersAreMissingUntilTheyRegister) {
  Membership members(2, 1, 1s);
  EXPECT_FALSE(members.all_ps_registered());
  EXPECT_EQ(members.PsRegistered(PsId(2), "h:1").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(members.PsRegistered(PsId(-1), "h:1").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(members.PsRegistered(PsId(0), "").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(members.PsRegistered(PsId(0), "h:1").ok());
  ASSERT_TRUE(members.PsRegistered(PsId(1), "h:2").ok());
  EXPECT_TRUE(members.all_ps_registered());
  EXPECT_EQ(members.ps_addresses(), (std::vector<std::string>{"h:1", "h:2"}));

  members.PsStarted(PsId(1), Handle("17"), /*relaunch=*/true);
  members.PsLost(PsId(1));
  EXPECT_EQ(members.registered_ps(), 1);
  EXPECT_EQ(members.ps_addresses(), (std::vector<std::string>{"h:1", ""}));
  EXPECT_TRUE(members.ps_processes()[1].second.backend_id.empty());
  EXPECT_EQ(members.ps_relaunches(), 1);
}

TEST(MembershipTest, OnlyRegisteredWorkersHaveLeasesThatLapse) {
  Membership members(0, 2, 100ms);
  const Clock::time_point t0 = Clock::now();
  members.WorkerStarted(WorkerId(members.NewWorkerId()), Handle("1"), false, t0);
  members.WorkerStarted(WorkerId(members.NewWorkerId()), Handle("2"), false, t0);
  EXPECT_EQ(members.Touch(WorkerId(7), t0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(members.Register(WorkerId(0)));
  EXPECT_FALSE(members.Register(WorkerId(0)));
  // Worker 1 never registered: it may still be starting.
  EXPECT_EQ(members.ExpiredLeases(t0 + 150ms), testing::WorkerIds({0}));
  ASSERT_TRUE(members.Touch(WorkerId(0), t0 + 120ms).ok());
  EXPECT_TRUE(members.ExpiredLeases(t0 + 150ms).empty());
  EXPECT_EQ(members.registered_workers(), 1);
  EXPECT_EQ(members.silence_ms(t0 + 150ms).at(WorkerId(1)), 150);
}

TEST(MembershipTest, LossesCountOnlyUncleanEnds) {
  Membership members(0, 2, 1s);
  const Clock::time_point now = Clock::now();
  members.WorkerStarted(WorkerId(0), Handle("1"), false, now);
  members.WorkerStarted(WorkerId(1), Handle("2"), true, now);
  EXPECT_FALSE(members.worker_relaunch_allowed(1));
  EXPECT_TRUE(members.Remove(WorkerId(0), /*clean=*/true));
  EXPECT_TRUE(members.Remove(WorkerId(1), /*clean=*/false));
  EXPECT_FALSE(members.Remove(WorkerId(1), false));
  EXPECT_EQ(members.worker_losses(), 1);
  EXPECT_TRUE(members.workers().empty());
}

TEST(MembershipTest, JoinedWorkersAskedToLeaveAreNoLongerListedAsJoined) {
  Membership members(0, 1, 1s);
  const WorkerId joined = members.WorkerJoined(4242, Clock::now());
  EXPECT_EQ(members.joined_workers(), std::vector<WorkerId>{joined});
  EXPECT_TRUE(members.AskToLeave(joined));
  EXPECT_FALSE(members.AskToLeave(joined));
  EXPECT_TRUE(members.leaving(joined));
  EXPECT_TRUE(members.joined_workers().empty());
  EXPECT_EQ(members.worker_processes()[0].second.pid, 4242);
}

TEST(MembershipTest, JournalRecordsHoldOnlyWhatChangedAndRestoreWhole) {
  Membership members(1, 3, 1s);
  const Clock::time_point now = Clock::now();
  ASSERT_TRUE(members.PsRegistered(PsId(0), "h:1").ok());
  for (int i = 0; i < 3; ++i) {
    members.WorkerStarted(WorkerId(members.NewWorkerId()), Handle(std::to_string(i)), false, now);
  }
  proto::MasterJournal snapshot;
  members.ScalarsTo(&snapshot);
  members.WorkersTo(&snapshot);
  EXPECT_EQ(snapshot.workers_size(), 3);

  proto::JournalChanges nothing;
  members.WorkerChangesTo(&nothing);
  EXPECT_EQ(nothing.workers_size(), 0);
  EXPECT_EQ(nothing.workers_gone_size(), 0);

  members.Remove(WorkerId(0), false);
  members.AskToLeave(WorkerId(2));
  members.WorkerStarted(WorkerId(members.NewWorkerId()), Handle("3"), true, now);
  proto::JournalChanges changes;
  members.WorkerChangesTo(&changes);
  ASSERT_EQ(changes.workers_gone_size(), 1);
  EXPECT_EQ(changes.workers_gone(0), 0);
  ASSERT_EQ(changes.workers_size(), 2);
  EXPECT_EQ(changes.workers(0).id(), 2);
  EXPECT_TRUE(changes.workers(0).leaving());
  EXPECT_EQ(changes.workers(1).id(), 3);

  proto::MasterJournal now_journal;
  members.ScalarsTo(&now_journal);
  members.WorkersTo(&now_journal);
  Membership restored(1, 1, 1s);
  restored.Restore(now_journal, now);
  EXPECT_EQ(restored.workers(), testing::WorkerIds({1, 2, 3}));
  EXPECT_TRUE(restored.leaving(WorkerId(2)));
  EXPECT_EQ(restored.registered_workers(), 3);  // their leases run from now
  EXPECT_EQ(restored.workers_target(), 3);
  EXPECT_EQ(restored.worker_losses(), 1);
  EXPECT_EQ(restored.NewWorkerId(), WorkerId(4));
  EXPECT_EQ(restored.ps_addresses(), std::vector<std::string>{"h:1"});
}

}  // namespace
}  // namespace elasticdl::master
