// Regions of shared memory between a worker and a parameter server: what
// one side puts the other takes, a read torn by a later write is refused,
// offsets outside the area are refused, and only files laid out as regions,
// of this user's alone, on a memory file system, are mapped.
#include "rpc/shared_tensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/strings.h"

namespace elasticdl::rpc {
namespace {

namespace fs = std::filesystem;
using Area = SharedTensorRegion::Area;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A private directory on the memory file system, removed afterwards.
class SharedTensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string base = SharedTensorRegion::DefaultDir();
    if (base.empty()) GTEST_SKIP() << "no memory file system at /dev/shm";
    std::string pattern = base + "/elasticdl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  static proto::Tensor Float32(const std::string& name, std::vector<float> values) {
    proto::Tensor t;
    t.set_name(name);
    t.set_dtype(proto::DT_FLOAT32);
    t.add_shape(static_cast<int64_t>(values.size()));
    t.set_content(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return t;
  }

  std::string dir_;
};

// The worker's side of a region made in `dir` and the server's, mapped.
struct RegionPair {
  std::unique_ptr<SharedTensorRegion> worker;
  std::unique_ptr<SharedTensorRegion> server;
};
RegionPair MakePair(const std::string& dir) {
  RegionPair pair;
  auto made = SharedTensorRegion::Create(dir, 4096);
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return pair;
  pair.worker = std::move(*made);
  auto opened = SharedTensorRegion::Open(dir, pair.worker->name());
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (opened.ok()) pair.server = std::move(*opened);
  return pair;
}

// Sends `request` once a server answers (SendCall is refused until then),
// and waits for the answer.
StatusOr<std::string> CallWhenServed(SharedTensorRegion* region, const std::string& request,
                                     milliseconds wait) {
  StatusOr<uint32_t> call = region->SendCall(request);
  for (int i = 0; i < 500 && !call.ok(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    call = region->SendCall(request);
  }
  if (!call.ok()) return call.status();
  return region->AwaitAnswer(*call, steady_clock::now() + wait);
}

TEST_F(SharedTensorsTest, CallsThroughTheRegionAreAnsweredByTheThreadThatServesIt) {
  RegionPair pair = MakePair(dir_);
  ASSERT_NE(pair.server, nullptr);
  // No server yet: refused, nothing sent.
  StatusOr<uint32_t> early = pair.worker->SendCall("early");
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();

  std::atomic<bool> stop{false};
  std::atomic<int> handled{0};
  std::thread server([&] {
    pair.server->ServeCalls(
        [&](std::string_view request) {
          ++handled;
          return StrCat("answer to ", request);
        },
        [&] { return stop.load(); }, milliseconds(20));
  });
  StatusOr<std::string> first = CallWhenServed(pair.worker.get(), "call 0", milliseconds(10000));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "answer to call 0");
  for (int i = 1; i < 200; ++i) {
    StatusOr<uint32_t> call = pair.worker->SendCall(StrCat("call ", i));
    ASSERT_TRUE(call.ok()) << call.status();
    StatusOr<std::string> answer =
        pair.worker->AwaitAnswer(*call, steady_clock::now() + milliseconds(10000));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(*answer, StrCat("answer to call ", i));
  }
  EXPECT_EQ(handled, 200);  // the early call was never taken
  // A request bigger than the call area is refused unsent.
  EXPECT_EQ(
      pair.worker->SendCall(std::string(SharedTensorRegion::kCallBytes + 1, 'x')).status().code(),
      absl::StatusCode::kFailedPrecondition);
  // Once the server stops, calls are refused again (the worker then calls
  // over the socket).
  stop = true;
  server.join();
  EXPECT_EQ(pair.worker->SendCall("late").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(handled, 200);
}

TEST_F(SharedTensorsTest, AWaitForAnAnswerEndsAtItsDeadlineAndWhenTheServerIsGone) {
  RegionPair pair = MakePair(dir_);
  ASSERT_NE(pair.server, nullptr);
  // A server that takes a call and answers it late: the caller gives up at
  // its deadline.
  std::atomic<bool> release{false};
  std::atomic<bool> stop{false};
  std::thread slow([&] {
    pair.server->ServeCalls(
        [&](std::string_view) {
          while (!release) std::this_thread::sleep_for(milliseconds(5));
          return std::string("late");
        },
        [&] { return stop.load(); }, milliseconds(20));
  });
  StatusOr<std::string> late = CallWhenServed(pair.worker.get(), "slow", milliseconds(100));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  release = true;
  stop = true;
  slow.join();

  // A server process that dies while it holds a call: the caller hears so
  // long before its deadline.
  RegionPair other = MakePair(dir_);
  ASSERT_NE(other.server, nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    other.server->ServeCalls([](std::string_view) -> std::string { ::_exit(0); },
                             [] { return false; }, milliseconds(20));
    ::_exit(1);
  }
  std::thread reaper([child] { ::waitpid(child, nullptr, 0); });
  const auto start = steady_clock::now();
  StatusOr<std::string> gone = CallWhenServed(other.worker.get(), "to die", milliseconds(60000));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable) << gone.status();
  EXPECT_LT(steady_clock::now() - start, milliseconds(30000));
  reaper.join();
}

TEST_F(SharedTensorsTest, WhatOneSidePutsTheOtherTakes) {
  auto worker = SharedTensorRegion::Create(dir_, 1000);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_GE((*worker)->area_bytes(), 1000u);
  TensorField gradients, updates;
  *gradients.Add() = Float32("w", {1, 2, 3});
  *gradients.Add() = Float32("b", {4});
  *updates.Add() = Float32("mean", {5, 6});
  const TensorField sent_gradients = gradients, sent_updates = updates;
  StatusOr<uint64_t> sequence = (*worker)->Put(Area::kPush, {&gradients, &updates});
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  EXPECT_EQ(*sequence % 2, 0u);
  for (const proto::Tensor& t : gradients) {
    EXPECT_TRUE(t.content().empty());
    EXPECT_TRUE(t.has_shared_offset());
  }

  // The server maps it by name; the file is then gone, the memory not.
  auto server = SharedTensorRegion::Open(dir_, (*worker)->name());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE(fs::exists(dir_ + "/" + (*worker)->name()));
  EXPECT_TRUE((*server)->Check(Area::kPush, *sequence).ok());
  ASSERT_TRUE((*server)->Take(Area::kPush, *sequence, {&gradients, &updates}).ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(gradients.Get(i).content(), sent_gradients.Get(i).content());
    EXPECT_FALSE(gradients.Get(i).has_shared_offset());
  }
  EXPECT_EQ(updates.Get(0).content(), sent_updates.Get(0).content());

  // Values back: copied from the server's own, described in the answer.
  TensorField values;
  *values.Add() = Float32("w", {7, 8, 9});
  TensorField answer;
  StatusOr<uint64_t> values_sequence = (*server)->PutCopies(Area::kValues, {{&values, &answer}});
  ASSERT_TRUE(values_sequence.ok()) << values_sequence.status();
  EXPECT_EQ(values.Get(0).content().size(), 12u);  // left as it was
  ASSERT_EQ(answer.size(), 1);
  EXPECT_EQ(answer.Get(0).name(), "w");
  EXPECT_TRUE(answer.Get(0).content().empty());
  ASSERT_TRUE((*worker)->Take(Area::kValues, *values_sequence, {&answer}).ok());
  EXPECT_EQ(answer.Get(0).content(), values.Get(0).content());
  EXPECT_EQ(answer.Get(0).shape(0), 3);
}

TEST_F(SharedTensorsTest, ValuesHeldByTheWriterArePutFromWhereTheyLie) {
  auto worker = SharedTensorRegion::Create(dir_, 1000);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::vector<float> w = {1, 2, 3}, mean = {5, 6};
  TensorField gradients, updates;
  *gradients.Add() = Float32("w", {0, 0, 0});
  gradients.Mutable(0)->clear_content();  // held by the writer
  *gradients.Add() = Float32("b", {4});   // in its message
  *updates.Add() = Float32("mean", {0, 0});
  updates.Mutable(0)->clear_content();
  const std::string_view held_w(reinterpret_cast<const char*>(w.data()), 12);
  const std::string_view held_mean(reinterpret_cast<const char*>(mean.data()), 8);

  // One view per tensor, or nothing is moved.
  const SharedTensorRegion::HeldBytes too_few = {held_w, {}};
  Status refused = (*worker)->Put(Area::kPush, {&gradients, &updates}, &too_few).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ(gradients.Get(1).content().size(), 4u);
  EXPECT_FALSE(gradients.Get(1).has_shared_offset());

  const SharedTensorRegion::HeldBytes held = {held_w, {}, held_mean};
  // As much room as the same tensors with their values in their messages.
  TensorField in_messages;
  *in_messages.Add() = Float32("w", w);
  *in_messages.Add() = Float32("b", {4});
  *in_messages.Add() = Float32("mean", mean);
  EXPECT_EQ(SharedTensorRegion::BytesFor({&gradients, &updates}, &held),
            SharedTensorRegion::BytesFor({&in_messages}));
  StatusOr<uint64_t> sequence = (*worker)->Put(Area::kPush, {&gradients, &updates}, &held);
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  auto server = SharedTensorRegion::Open(dir_, (*worker)->name());
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Take(Area::kPush, *sequence, {&gradients, &updates}).ok());
  EXPECT_EQ(gradients.Get(0).content(), held_w);
  EXPECT_EQ(gradients.Get(1).content(), Float32("b", {4}).content());
  EXPECT_EQ(updates.Get(0).content(), held_mean);
}

TEST_F(SharedTensorsTest, AReadTornByALaterWriteIsRefused) {
  auto worker = SharedTensorRegion::Create(dir_, 1000);
  ASSERT_TRUE(worker.ok()) << worker.status();
  TensorField first;
  *first.Add() = Float32("w", {1, 2});
  StatusOr<uint64_t> sequence = (*worker)->Put(Area::kPush, {&first});
  ASSERT_TRUE(sequence.ok());
  auto server = SharedTensorRegion::Open(dir_, (*worker)->name());
  ASSERT_TRUE(server.ok()) << server.status();
  // The worker gave up on that push and wrote another before it was read.
  TensorField second;
  *second.Add() = Float32("w", {3, 4});
  ASSERT_TRUE((*worker)->Put(Area::kPush, {&second}).ok());
  Status torn = (*server)->Take(Area::kPush, *sequence, {&first});
  EXPECT_EQ(torn.code(), absl::StatusCode::kAborted) << torn;
  EXPECT_TRUE(first.Get(0).content().empty());  // nothing of it kept
  EXPECT_EQ((*server)->Check(Area::kPush, *sequence).code(), absl::StatusCode::kAborted);
  // An odd number is a write in progress, never a message's.
  EXPECT_EQ((*server)->Check(Area::kPush, *sequence + 1).code(), absl::StatusCode::kAborted);
}

TEST_F(SharedTensorsTest, TensorsOutsideTheAreaOrTooManyAreRefused) {
  auto worker = SharedTensorRegion::Create(dir_, 4096);
  ASSERT_TRUE(worker.ok()) << worker.status();
  TensorField field;
  *field.Add() = Float32("w", {1, 2});
  StatusOr<uint64_t> sequence = (*worker)->Put(Area::kPush, {&field});
  ASSERT_TRUE(sequence.ok());
  TensorField beyond = field;
  beyond.Mutable(0)->set_shared_offset((*worker)->area_bytes() - 4);  // 8 bytes from there
  Status outside = (*worker)->Take(Area::kPush, *sequence, {&beyond});
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
  EXPECT_NE(std::string(outside.message()).find("'w'"), std::string::npos) << outside;
  TensorField both = field;
  both.Mutable(0)->set_content("12345678");
  EXPECT_EQ((*worker)->Take(Area::kPush, *sequence, {&both}).code(),
            absl::StatusCode::kInvalidArgument);
  // More than an area holds: nothing moved.
  TensorField big;
  *big.Add() = Float32("big", std::vector<float>((*worker)->area_bytes() / 4 + 1, 1.0f));
  EXPECT_EQ((*worker)->Put(Area::kPush, {&big}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(big.Get(0).content().size(), ((*worker)->area_bytes() / 4 + 1) * 4);
  EXPECT_FALSE(big.Get(0).has_shared_offset());
}

TEST_F(SharedTensorsTest, OnlyRegionsOfThisUsersAloneOnAMemoryFileSystemAreMapped) {
  auto open = [&](const std::string& dir, const std::string& name) {
    return SharedTensorRegion::Open(dir, name).status();
  };
  for (const std::string& name : {std::string("../../etc/passwd"), std::string("other-file"),
                                  std::string("elasticdl-tensors-0-1-0-../x")}) {
    Status refused = open(dir_, name);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(std::string(refused.message()).find(name), std::string::npos) << refused;
  }
  const std::string name = StrCat("elasticdl-tensors-", ::getuid(), "-1-0-abc");
  EXPECT_EQ(open(dir_, name).code(), absl::StatusCode::kFailedPrecondition);  // missing
  const std::string path = dir_ + "/" + name;
  {
    std::ofstream file(path);
    // Not laid out as a region.
    file << std::string(3 * 4096 + 2 * SharedTensorRegion::kCallBytes, 'x');
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  Status layout = open(dir_, name);
  EXPECT_EQ(layout.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(layout.message()).find("not laid out"), std::string::npos) << layout;
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);  // others may read it
  Status shared = open(dir_, name);
  EXPECT_NE(std::string(shared.message()).find("alone"), std::string::npos) << shared;
  // A region on a disk's file system would be written back to the disk.
  struct statfs tmp {};
  const char* base = std::getenv("TMPDIR");
  const std::string disk = base != nullptr ? base : "/tmp";
  if (::statfs(disk.c_str(), &tmp) == 0 && tmp.f_type != 0x01021994 /* TMPFS_MAGIC */) {
    auto region = SharedTensorRegion::Create(disk, 4096);
    ASSERT_TRUE(region.ok()) << region.status();
    Status on_disk = open(disk, (*region)->name());
    EXPECT_NE(std::string(on_disk.message()).find("memory file system"), std::string::npos)
        << on_disk;
  }
}

TEST_F(SharedTensorsTest, RegionsOfWorkersThatAreGoneAreRemoved) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string orphan = StrCat(dir_, "/elasticdl-tensors-", ::getuid(), "-", child, "-0-ab");
  const std::string mine =
      StrCat(dir_, "/elasticdl-tensors-", ::getuid(), "-", ::getpid(), "-9-cd");
  std::ofstream(orphan) << "x";
  std::ofstream(mine) << "x";
  auto region = SharedTensorRegion::Create(dir_, 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(mine));
  const std::string made = dir_ + "/" + (*region)->name();
  EXPECT_TRUE(fs::exists(made));
  region->reset();  // its maker removes a region nobody mapped
  EXPECT_FALSE(fs::exists(made));
}

}  // namespace
}  // namespace elasticdl::rpc
