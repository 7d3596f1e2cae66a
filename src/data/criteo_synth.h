// `elasticdl data criteo_synth`: Criteo-format click logs drawn from a known
// ground truth, so that a recommendation model's AUC can be held against the
// best any model can reach on the same data.
//
// Features. Categorical field Cf draws the rank of its value from a Zipf
// distribution over its vocabulary (sizes shaped like the Kaggle data's, the
// largest cut down: about 600,000 ids over the 26 fields at scale 1, from 3
// for C9 to 120,000 for C3) and writes it as 8 lowercase hex digits, a
// seed-keyed bijection of (field, rank), so no two values of a field collide.
// Fields are missing at Criteo's rates (C19, C20, C25, C26 in about 44% of
// the lines). Integer features are Lomax (Pareto II) draws, heavy-tailed, with
// Criteo's missing rates; I2 is negative (-1..-3) in 2% of the lines.
//
// Labels. A hidden factorisation machine gives each line
//   raw = sum_f w[f,id] + sum_{f<g} <v[f,id], v[g,id']> + sum_k b[k] log(1 + max(I_k, 0))
// with latent vectors v of dimension 8; weights and vectors are functions of
// (seed, field, id), so nothing is stored. The click probability is
// p = sigmoid(bias + scale * (raw - mean)), where mean, scale and bias are
// fitted on a pilot sample so that the logits' standard deviation is
// `logit_stddev` and the mean p is `click_rate`. The label is a Bernoulli(p)
// draw. The same options always write the same bytes.
//
// Truth file. Beside each TSV, <tsv>.truth.json:
//   {"file": "train.tsv", "seed": 1, "records": 1000000, "clicks": 247708,
//    "click_rate": 0.247708, "optimum_auc": 0.8102, "optimum_log_loss": 0.4338,
//    "constant_log_loss": 0.5598,
//    "generator": {"zipf": 1.1, "vocabulary_scale": 1, "latent_dim": 8,
//                  "target_click_rate": 0.25, "logit_stddev": 1.4},
//    "categorical": {"C1": {"vocabulary": 1460, "distinct": 1460}, ...}}
// optimum_auc is the exact AUC of the true p against the drawn labels (null
// when the file holds one class only): what a perfect model scores on this
// file. optimum_log_loss is the true p's mean log-loss; constant_log_loss that
// of predicting click_rate everywhere. `distinct` counts the field's values
// that occur in the file.
#ifndef ELASTICDL_DATA_CRITEO_SYNTH_H_
#define ELASTICDL_DATA_CRITEO_SYNTH_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/criteo_import.h"
#include "elasticdl/status.h"

namespace elasticdl {

struct CriteoSynthOptions {
  // The TSV to write (required). Its truth file is <output>.truth.json.
  std::string output;
  // Lines in `output` (required, > 0).
  uint64_t records = 0;
  // A held-out file: `test_records` more lines from the same hidden model
  // (other draws) written to `test_output`, with its own truth file. Give
  // both or neither. Default: none.
  std::string test_output;
  uint64_t test_records = 0;
  // Everything follows from the seed: the hidden model, the hex strings and
  // the draws. Default 0.
  uint64_t seed = 0;
  // Zipf exponent of the categorical values' frequencies (> 0). Larger:
  // fewer values take more of the lines. Default 1.1.
  double zipf = 1.1;
  // Multiplies every field's vocabulary (each keeps at least one value; none
  // may pass 2^32). Default 1: about 600,000 ids; 50 nears the Kaggle data's
  // 33 million.
  double vocabulary_scale = 1.0;
  // The mean click probability, in (0, 1). Default 0.25.
  double click_rate = 0.25;
  // The spread of the true logits (> 0): the signal's strength. Larger means
  // a higher optimum AUC; the default 1.4 gives about 0.81.
  double logit_stddev = 1.4;
};

// What one written file holds; also what its truth file says.
struct CriteoSynthTruth {
  std::string file;        // the TSV
  std::string truth_file;  // its JSON
  uint64_t records = 0;
  uint64_t clicks = 0;
  double click_rate = 0;
  std::optional<double> optimum_auc;  // nullopt: one class only
  double optimum_log_loss = 0;
  double constant_log_loss = 0;
  std::array<uint64_t, kCriteoCategoricalFeatures> vocabulary{};
  std::array<uint64_t, kCriteoCategoricalFeatures> distinct{};
};

// Writes options.output (and options.test_output) with their truth files;
// returns their truths in that order. INVALID_ARGUMENT for bad options. Files
// are written under a ".partial" suffix and renamed when complete.
StatusOr<std::vector<CriteoSynthTruth>> SynthesizeCriteo(const CriteoSynthOptions& options);

// The vocabulary size of each categorical field at `scale`.
std::array<uint64_t, kCriteoCategoricalFeatures> CriteoSynthVocabulary(double scale);

// The exact area under the ROC curve of `scores` against `labels` (0 or 1,
// same length): the Mann-Whitney statistic, tied scores sharing their mean
// rank. nullopt when the labels are all 0 or all 1.
std::optional<double> ExactAuc(const std::vector<double>& scores,
                               const std::vector<uint8_t>& labels);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_CRITEO_SYNTH_H_
