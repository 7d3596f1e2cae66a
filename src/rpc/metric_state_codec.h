// Metric states (elasticdl/zoo/metric_state.h) on the wire
// (proto::MetricState): what workers report and the master journals.
#ifndef ELASTICDL_RPC_METRIC_STATE_CODEC_H_
#define ELASTICDL_RPC_METRIC_STATE_CODEC_H_

#include <string>

#include "elasticdl/proto/elasticdl.pb.h"
#include "elasticdl/zoo/metric_state.h"

namespace elasticdl::rpc {

inline proto::MetricState MetricStateToProto(const std::string& name, const MetricState& s) {
  proto::MetricState m;
  m.set_name(name);
  m.set_kind(s.kind == MetricKind::kAuc ? proto::METRIC_AUC : proto::METRIC_MEAN);
  for (double v : s.values) m.add_values(v);
  return m;
}

inline MetricState MetricStateFromProto(const proto::MetricState& m) {
  MetricState s;
  s.kind = m.kind() == proto::METRIC_AUC ? MetricKind::kAuc : MetricKind::kMean;
  s.values.assign(m.values().begin(), m.values().end());
  return s;
}

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_METRIC_STATE_CODEC_H_
