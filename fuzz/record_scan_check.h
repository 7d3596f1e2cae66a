// The properties every RecordFile must have, whatever bytes it was opened on,
// checked by the RecordIO and TFRecord fuzzers:
//
//  * Scan() refuses ranges outside [0, num_records()) with INVALID_ARGUMENT;
//  * a scanner yields consecutive indices from its start and, when it ends
//    without an error, exactly end - start records, then keeps returning false;
//  * every error is DATA_LOSS (the file's bytes are the only thing wrong);
//  * a scan of a sub-range yields the same bytes as the whole-file scan does
//    for those indices, and if the whole file scans cleanly so does the range.
#ifndef ELASTICDL_FUZZ_RECORD_SCAN_CHECK_H_
#define ELASTICDL_FUZZ_RECORD_SCAN_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl::fuzz {

// Checks the properties above on `file`, with a sub-range chosen by
// `range_seed`. Returns every record of the file when the whole-file scan
// succeeded and the records total at most `keep_bytes` (for round trips);
// nullopt otherwise.
std::optional<std::vector<std::string>> CheckScans(const RecordFile& file, uint16_t range_seed,
                                                   size_t keep_bytes);

// Aborts unless `status` is DATA_LOSS; `what` names the operation.
void CheckDataLoss(const Status& status, const char* what);

}  // namespace elasticdl::fuzz

#endif  // ELASTICDL_FUZZ_RECORD_SCAN_CHECK_H_
