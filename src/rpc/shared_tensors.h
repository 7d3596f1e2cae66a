// Tensors between a worker and a parameter server on one machine, through
// shared memory instead of the socket: the push's gradients and buffer
// updates, and the values that answer it, are copied into a region both
// processes map, and the gRPC messages carry only where each tensor lies
// (proto::Tensor.shared_offset). A push of the MNIST model (445 KB each way)
// then crosses the socket as a few hundred bytes.
//
// A region is a file in /dev/shm (memory, never written back to a disk, and
// only on this machine), mode 0600: readable by the job's user alone, as the
// sockets in the job's private directory it replaces. The worker makes and
// sizes it, the server maps it on the first push that names it and then
// unlinks it. It has two areas, each written by one side only: the push area
// by the worker, the values area by the server. Each area has a sequence
// number, odd while its writer writes; a message names the even number its
// tensors were written under, and the reader checks that number before and
// after copying. A read torn by a later write (a worker that gave up waiting
// for an answer and pushed again while the server still read) is thus
// detected and refused, never used.
//
// Calls through the region. A server that has mapped a region also answers
// pushes and pulls made through the region itself, with no socket at all (a
// pull may wait there for a synchronous step, as over the socket): the worker
// writes the request's bytes into the region's call area and wakes the
// server's thread for the region with a futex; the answer comes back the
// same way. A call is either taken (the server will answer it, or its
// process is gone) or refused before anything is sent (no thread serves the
// region: the worker calls over the socket instead). A worker that stops
// waiting for an answer (its deadline, the server's process gone) never
// uses that region's call area again.
#ifndef ELASTICDL_RPC_SHARED_TENSORS_H_
#define ELASTICDL_RPC_SHARED_TENSORS_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/status.h"

namespace elasticdl::rpc {

using TensorField = google::protobuf::RepeatedPtrField<proto::Tensor>;

class SharedTensorRegion {
 public:
  enum class Area { kPush, kValues };

  // Where regions are made: /dev/shm when it is a memory file system, ""
  // (no regions: tensors travel in the messages) otherwise.
  static std::string DefaultDir();

  // The worker's side: a new file in `dir` with room for `area_bytes` in
  // each area, its memory reserved (RESOURCE_EXHAUSTED when the file system
  // has no room), mapped. Files a worker process that is gone left there
  // are removed first.
  static StatusOr<std::unique_ptr<SharedTensorRegion>> Create(const std::string& dir,
                                                              size_t area_bytes);
  // The server's side: maps the region `name` a worker made in `dir` and
  // unlinks its file. FAILED_PRECONDITION, naming it, when it is not one: a
  // name not of a region, a file that is missing (made on another machine,
  // or gone), not a plain file of this user's alone, not on a memory file
  // system, or not laid out as a region.
  static StatusOr<std::unique_ptr<SharedTensorRegion>> Open(const std::string& dir,
                                                            const std::string& name);

  SharedTensorRegion(const SharedTensorRegion&) = delete;
  SharedTensorRegion& operator=(const SharedTensorRegion&) = delete;
  // Unmaps; the side that made the file removes it if it is still there.
  ~SharedTensorRegion();

  const std::string& name() const { return name_; }
  size_t area_bytes() const { return area_bytes_; }

  // Tensors' values held by their writer rather than in their messages: by
  // tensor of the fields written, in order, its bytes; an empty view where
  // the message's content holds them.
  using HeldBytes = std::vector<std::string_view>;

  // The bytes the values of `fields` (with `held`, when given) take in an
  // area.
  static size_t BytesFor(std::initializer_list<const TensorField*> fields,
                         const HeldBytes* held = nullptr);

  // Moves the values of every tensor of `fields` into `area`, from its
  // content or, with `held`, from where its writer holds them: each
  // tensor's content is cleared and its shared_offset set. Returns the
  // sequence number the reader must find. RESOURCE_EXHAUSTED, with nothing
  // moved, when they do not fit; INVALID_ARGUMENT when `held` does not name
  // one view per tensor. One writer per area at a time.
  StatusOr<uint64_t> Put(Area area, std::initializer_list<TensorField*> fields,
                         const HeldBytes* held = nullptr);
  // As Put, leaving each `first` field as it is: its tensors' values are
  // copied into `area` and their descriptions (with shared_offset, without
  // content) appended to the `second` field.
  StatusOr<uint64_t> PutCopies(
      Area area, std::initializer_list<std::pair<const TensorField*, TensorField*>> fields);

  // A reader that decodes in place (DecodeTensor's `shared`): the bytes of
  // `area`, to be read only between two Checks of the message's sequence
  // number, the second after the reading.
  std::string_view Bytes(Area area) const { return {area_of(area), area_bytes_}; }
  // ABORTED unless `area` is at `sequence` (its writer has not begun
  // another write since).
  Status Check(Area area, uint64_t sequence) const;

  // Brings the values of every tensor of `fields` that has a shared_offset
  // back into its content (the offset cleared). ABORTED when `area` is not
  // at `sequence` before and after the copy (what was read is then dropped:
  // contents stay empty); INVALID_ARGUMENT, naming the tensor, when its
  // bytes (by dtype and shape) would lie outside the area or it also has a
  // content.
  Status Take(Area area, uint64_t sequence, std::initializer_list<TensorField*> fields) const;

  // The most bytes a call's request or answer may take.
  static constexpr size_t kCallBytes = 64 << 10;

  // The caller's side: sends `request`. FAILED_PRECONDITION, with nothing
  // sent, when no thread serves the region's calls or the request is too
  // big; otherwise the call's number, for AwaitAnswer. One call at a time.
  StatusOr<uint32_t> SendCall(std::string_view request);
  // The answer to `call`. UNAVAILABLE once the serving process is gone;
  // DEADLINE_EXCEEDED at `deadline`. After either, the call area must not
  // be used again: the call may still be answered.
  StatusOr<std::string> AwaitAnswer(uint32_t call,
                                    std::chrono::steady_clock::time_point deadline) const;

  // The server's side: calls are taken from now on (ServeCalls answers
  // them, those taken before it runs included).
  void OpenCalls();
  // On a thread of its own: opens the calls and answers every one with
  // `handle` until `stop` (asked at least every `poll`) is true, then
  // refuses the calls that follow and returns, the last one taken answered.
  // One thread per region.
  void ServeCalls(const std::function<std::string(std::string_view)>& handle,
                  const std::function<bool()>& stop, std::chrono::milliseconds poll);

 private:
  struct Header;
  SharedTensorRegion(std::string path, std::string name, void* base, size_t size, bool owner);
  Header* header() const;
  char* area_of(Area a) const;
  // The call area's request bytes, or its answer's.
  char* call_area(bool answer) const;
  std::atomic<uint64_t>& sequence_of(Area a) const;
  StatusOr<uint64_t> Write(Area area,
                           const std::vector<std::pair<const TensorField*, TensorField*>>& fields,
                           const HeldBytes* held);

  const std::string path_;
  const std::string name_;
  void* const base_;
  const size_t size_;
  const size_t area_bytes_;
  const bool owner_;
};

// A server's regions, mapped on a push's first mention and kept for the
// next ones; the least recently used is dropped beyond `capacity` (a worker
// whose region was dropped is answered shared_unreadable and makes another).
class SharedTensorRegions {
 public:
  // `dir`: where workers make regions (DefaultDir()); empty: none is mapped.
  explicit SharedTensorRegions(std::string dir, size_t capacity = 64)
      : dir_(std::move(dir)), capacity_(capacity) {}

  // A region and the lock that serialises its users (a stale push and a
  // new one of the same worker must not write its values area together).
  struct Entry {
    std::unique_ptr<SharedTensorRegion> region;
    std::mutex mu;
    // Set once the region is dropped (beyond capacity): whoever serves its
    // calls stops.
    std::atomic<bool> dropped{false};
    // A thread answers the calls made through the region.
    std::atomic<bool> served{false};
  };
  // The region `name`, mapped now or before; Open's errors.
  StatusOr<std::shared_ptr<Entry>> Get(const std::string& name);

 private:
  const std::string dir_;
  const size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<Entry>>> entries_;  // most recent first
};

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_SHARED_TENSORS_H_
