// Typed ids: a worker's, a parameter server's, a task's. Each is its own
// type, so a function that takes a WorkerId accepts neither a PsId nor a
// count; value() is the number the wire, the journal and the logs carry.
// Converting from a number is explicit and happens where one is read: a
// request, a flag, a journal record.
#ifndef ELASTICDL_COMMON_IDS_H_
#define ELASTICDL_COMMON_IDS_H_

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

namespace elasticdl {

template <typename Tag, typename Rep>
class TypedId {
 public:
  using rep = Rep;

  constexpr TypedId() = default;
  constexpr explicit TypedId(Rep value) : value_(value) {}

  constexpr Rep value() const { return value_; }

  friend constexpr bool operator==(TypedId a, TypedId b) { return a.value_ == b.value_; }
  friend constexpr bool operator!=(TypedId a, TypedId b) { return a.value_ != b.value_; }
  friend constexpr bool operator<(TypedId a, TypedId b) { return a.value_ < b.value_; }
  friend constexpr bool operator>(TypedId a, TypedId b) { return a.value_ > b.value_; }
  friend constexpr bool operator<=(TypedId a, TypedId b) { return a.value_ <= b.value_; }
  friend constexpr bool operator>=(TypedId a, TypedId b) { return a.value_ >= b.value_; }
  friend std::ostream& operator<<(std::ostream& os, TypedId id) { return os << id.value_; }

 private:
  Rep value_ = 0;
};

// A worker of a job: numbered by the master from 0, never reused within a
// job (a relaunched worker gets a new id).
using WorkerId = TypedId<struct WorkerIdTag, int32_t>;
// A parameter server: the shard it holds, 0 .. num_ps - 1, kept across
// relaunches.
using PsId = TypedId<struct PsIdTag, int32_t>;
// A task of the job's task manager, unique within the job.
using TaskId = TypedId<struct TaskIdTag, int64_t>;

}  // namespace elasticdl

// A specialization for a program-defined type, which [namespace.std] allows.
template <typename Tag, typename Rep>
struct std::hash<elasticdl::TypedId<Tag, Rep>> {  // NOLINT(bugprone-std-namespace-modification)
  size_t operator()(elasticdl::TypedId<Tag, Rep> id) const { return std::hash<Rep>()(id.value()); }
};

template <typename Tag, typename Rep>
struct fmt::formatter<elasticdl::TypedId<Tag, Rep>> : fmt::formatter<Rep> {
  template <typename FormatContext>
  auto format(elasticdl::TypedId<Tag, Rep> id, FormatContext& ctx) const {
    return fmt::formatter<Rep>::format(id.value(), ctx);
  }
};

#endif  // ELASTICDL_COMMON_IDS_H_
