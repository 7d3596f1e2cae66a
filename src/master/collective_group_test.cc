#include "master/collective_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace elasticdl::master {
namespace {

proto::RendezvousResponse Join(CollectiveGroup& group, int worker, int64_t failed = 0) {
  proto::RendezvousResponse place;
  EXPECT_TRUE(group.Join(WorkerId(worker), failed, &place).ok());
  return place;
}

proto::GroupStoreRequest Op(proto::GroupStoreRequest::Op op, int64_t version,
                            const std::string& key = "", const std::string& value = "") {
  proto::GroupStoreRequest request;
  request.set_op(op);
  request.set_version(version);
  request.set_key(key);
  request.set_value(value);
  return request;
}

TEST(CollectiveGroupTest, MembersAreRankedByWorkerIdAndEveryChangeIsAVersion) {
  CollectiveGroup group(100);
  const int64_t empty = group.version();
  proto::RendezvousResponse five = Join(group, 5);
  EXPECT_GT(five.version(), empty);
  EXPECT_EQ(five.rank(), 0);
  EXPECT_EQ(five.world_size(), 1);
  proto::RendezvousResponse two = Join(group, 2);
  EXPECT_GT(two.version(), five.version());
  EXPECT_EQ(two.rank(), 0);
  EXPECT_EQ(two.world_size(), 2);
  // A member asking again gets its place in the same version.
  proto::RendezvousResponse again = Join(group, 5);
  EXPECT_EQ(again.version(), two.version());
  EXPECT_EQ(again.rank(), 1);
  EXPECT_EQ(again.secret(), two.secret());
  // A member that saw the newest version fail makes another of the same members,
  // with another secret; one that saw an older version fail does not.
  proto::RendezvousResponse renewed = Join(group, 2, two.version());
  EXPECT_GT(renewed.version(), two.version());
  EXPECT_EQ(renewed.world_size(), 2);
  EXPECT_NE(renewed.secret(), two.secret());
  EXPECT_EQ(Join(group, 5, two.version()).version(), renewed.version());
  group.Leave(WorkerId(2));
  EXPECT_GT(group.version(), renewed.version());
  EXPECT_EQ(group.members(), std::vector<WorkerId>{WorkerId(5)});
  const int64_t one = group.version();
  group.Leave(WorkerId(9));  // not a member: nothing changes
  EXPECT_EQ(group.version(), one);
}

TEST(CollectiveGroupTest, VersionsOfAnotherMasterDiffer) {
  CollectiveGroup first;
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CollectiveGroup second;
  EXPECT_GT(second.version(), first.version());
}

TEST(CollectiveGroupTest, TheStoreServesTheNewestVersionsMembersOnly) {
  CollectiveGroup group(0);
  const int64_t v = Join(group, 1).version();
  proto::GroupStoreResponse response;
  ASSERT_TRUE(
      group.Store(WorkerId(1), Op(proto::GroupStoreRequest::SET, v, "a", "x"), &response).ok());
  ASSERT_TRUE(group.Store(WorkerId(1), Op(proto::GroupStoreRequest::GET, v, "a"), &response).ok());
  EXPECT_TRUE(response.found());
  EXPECT_EQ(response.value(), "x");
  // Not a member; another version.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      group.Store(WorkerId(2), Op(proto::GroupStoreRequest::GET, v, "a"), &response)));
  const int64_t next = Join(group, 2).version();
  Status old = group.Store(WorkerId(1), Op(proto::GroupStoreRequest::GET, v, "a"), &response);
  EXPECT_TRUE(absl::IsFailedPrecondition(old)) << old;
  EXPECT_NE(std::string(old.message()).find("is over"), std::string::npos);
  // A new version starts with an empty store.
  response.Clear();
  ASSERT_TRUE(
      group.Store(WorkerId(1), Op(proto::GroupStoreRequest::GET, next, "a"), &response).ok());
  EXPECT_FALSE(response.found());

  proto::GroupStoreRequest add = Op(proto::GroupStoreRequest::ADD, next, "n");
  add.set_amount(3);
  ASSERT_TRUE(group.Store(WorkerId(1), add, &response).ok());
  ASSERT_TRUE(group.Store(WorkerId(2), add, &response).ok());
  EXPECT_EQ(response.number(), 6);
  proto::GroupStoreRequest check = Op(proto::GroupStoreRequest::CHECK, next);
  check.add_keys("n");
  check.add_keys("m");
  ASSERT_TRUE(group.Store(WorkerId(1), check, &response).ok());
  EXPECT_FALSE(response.found());
  ASSERT_TRUE(
      group.Store(WorkerId(1), Op(proto::GroupStoreRequest::NUM_KEYS, next), &response).ok());
  EXPECT_EQ(response.number(), 1);
  ASSERT_TRUE(
      group.Store(WorkerId(1), Op(proto::GroupStoreRequest::DELETE, next, "n"), &response).ok());
  EXPECT_TRUE(response.found());
}

TEST(CollectiveGroupTest, GetWaitsForTheKeyOrTheVersionsEnd) {
  CollectiveGroup group(0);
  Join(group, 1);
  const int64_t v = Join(group, 2).version();
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    proto::GroupStoreResponse ignored;
    EXPECT_TRUE(
        group.Store(WorkerId(2), Op(proto::GroupStoreRequest::SET, v, "addr", "1"), &ignored).ok());
  });
  proto::GroupStoreRequest get = Op(proto::GroupStoreRequest::GET, v, "addr");
  get.set_wait_ms(5000);
  proto::GroupStoreResponse response;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(group.Store(WorkerId(1), get, &response).ok());
  setter.join();
  EXPECT_TRUE(response.found());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));

  // A member lost while another waits: the wait ends at once.
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    group.Leave(WorkerId(2));
  });
  get.set_key("never");
  Status s = group.Store(WorkerId(1), get, &response);
  leaver.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
}

}  // namespace
}  // namespace elasticdl::master
