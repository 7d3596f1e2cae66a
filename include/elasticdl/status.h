// Status and StatusOr for everything in ElasticDL that can fail.
//
// ElasticDL reports failures as values, never as aborts: a corrupt file is
// DATA_LOSS, a bad flag or record is INVALID_ARGUMENT, a lost peer is
// UNAVAILABLE. The codes are abseil's, which are gRPC's, so a status crosses
// an RPC boundary unchanged.
#ifndef ELASTICDL_STATUS_H_
#define ELASTICDL_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace elasticdl {

using absl::Status;
using absl::StatusCode;
using absl::StatusOr;

// Returns `status` with `context + ": "` put in front of its message; OK stays OK.
inline Status Annotate(const Status& status, std::string_view context) {
  if (status.ok()) return status;
  std::string message(context);
  message += ": ";
  message.append(status.message().data(), status.message().size());
  return Status(status.code(), message);
}

}  // namespace elasticdl

#define ELASTICDL_STATUS_CONCAT_INNER_(a, b) a##b
#define ELASTICDL_STATUS_CONCAT_(a, b) ELASTICDL_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (a Status); returns it from the enclosing function if not OK.
#define EDL_RETURN_IF_ERROR(expr)               \
  do {                                          \
    const ::absl::Status& edl_status_ = (expr); \
    if (!edl_status_.ok()) return edl_status_;  \
  } while (false)

// Like EDL_RETURN_IF_ERROR, and puts `context` in front of the message.
// `context` (anything convertible to std::string_view) is evaluated only on
// error, so building it costs nothing on the success path.
#define EDL_RETURN_IF_ERROR_WITH_CONTEXT(expr, context)                          \
  do {                                                                           \
    const ::absl::Status& edl_status_ = (expr);                                  \
    if (!edl_status_.ok()) return ::elasticdl::Annotate(edl_status_, (context)); \
  } while (false)

// Evaluates `expr` (a StatusOr<T>); returns its status if not OK, otherwise
// moves the value into `lhs` (a declaration such as `auto x` or an lvalue).
#define EDL_ASSIGN_OR_RETURN(lhs, expr) \
  EDL_ASSIGN_OR_RETURN_IMPL_(ELASTICDL_STATUS_CONCAT_(edl_statusor_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` may be a declaration.
#define EDL_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)    \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
// NOLINTEND(bugprone-macro-parentheses)

#endif  // ELASTICDL_STATUS_H_
