// Seed 002's schemas: the columns of feature_columns() and label_columns(),
// and input_fn's outputs checked against them (elasticdl/zoo/columns.h).
// Errors describe the problem; the caller puts the entry in front.
#ifndef ELASTICDL_ZOO_INPUT_COLUMNS_H_
#define ELASTICDL_ZOO_INPUT_COLUMNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "elasticdl/data/dataset.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/columns.h"
#include "elasticdl/zoo/model.h"

namespace elasticdl {

// "image Float [1, 28, 28]".
std::string DescribeColumn(const NumericColumn& column);

// Keys present and unique, dimensions positive, at least one column; label
// columns exactly one (input_fn returns one labels tensor).
// INVALID_ARGUMENT saying which.
Status ValidateColumns(const std::vector<NumericColumn>& columns, bool labels);

// input_fn's `result` for a minibatch of `batch` records as an Example: each
// feature column's input, of the column's dtype and number of values per
// example, reshaped to [batch, shape...]; likewise the labels, which are
// left out in prediction. A missing or undeclared input, another dtype, a
// first dimension other than `batch` or another number of values is
// INVALID_ARGUMENT naming the key and both sides.
StatusOr<Example> ApplyColumns(InputFnResult result, const std::vector<NumericColumn>& features,
                               const NumericColumn& label, int64_t batch, Mode mode);

}  // namespace elasticdl

#endif  // ELASTICDL_ZOO_INPUT_COLUMNS_H_
