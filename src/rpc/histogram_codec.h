// Histograms (common/histogram.h) on the wire (proto::Histogram).
#ifndef ELASTICDL_RPC_HISTOGRAM_CODEC_H_
#define ELASTICDL_RPC_HISTOGRAM_CODEC_H_

#include "common/histogram.h"
#include "elasticdl/proto/elasticdl.pb.h"

namespace elasticdl::rpc {

inline void HistogramToProto(const Histogram& h, proto::Histogram* out) {
  out->Clear();
  out->mutable_bounds()->Add(h.bounds.begin(), h.bounds.end());
  out->mutable_counts()->Add(h.counts.begin(), h.counts.end());
  out->set_sum(h.sum);
  out->set_count(h.count);
}

// A histogram of the message's bounds; counts that do not fit them (one per
// bucket and one above) leave it empty.
inline Histogram HistogramFromProto(const proto::Histogram& m) {
  Histogram h(std::vector<double>(m.bounds().begin(), m.bounds().end()));
  if (static_cast<size_t>(m.counts_size()) != h.counts.size()) return h;
  h.counts.assign(m.counts().begin(), m.counts().end());
  h.sum = m.sum();
  h.count = m.count();
  return h;
}

}  // namespace elasticdl::rpc

#endif  // ELASTICDL_RPC_HISTOGRAM_CODEC_H_
