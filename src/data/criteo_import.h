// Criteo click logs (the Kaggle Display Advertising Challenge / Criteo 1TB
// text format) to shards of tf.train.Example records.
//
// Each line holds 40 tab-separated fields: the label (0 or 1), 13 integer
// features I1..I13 and 26 categorical features C1..C26 (hashed values written
// as hex strings). An empty field is a missing value. Every record becomes an
// Example with `label` int64[1], `I1`..`I13` int64[1] and `C1`..`C26`
// bytes[1] (the string as in the file, not checked to be hex); a missing
// field is left out of that record's Example, so readers apply their default.
// Integer features may be negative (Criteo's I2 is).
#ifndef ELASTICDL_DATA_CRITEO_IMPORT_H_
#define ELASTICDL_DATA_CRITEO_IMPORT_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/data/record_file.h"

namespace elasticdl {

inline constexpr int kCriteoIntegerFeatures = 13;
inline constexpr int kCriteoCategoricalFeatures = 26;
// label, I1..I13, C1..C26.
inline constexpr int kCriteoFields = 1 + kCriteoIntegerFeatures + kCriteoCategoricalFeatures;

// The name of field `index` (0-based column of a line): "label", "I1".."I13",
// "C1".."C26".
std::string CriteoFieldName(int index);

// One line taken apart. The strings are views into the line.
struct CriteoRecord {
  int64_t label = 0;
  std::array<std::optional<int64_t>, kCriteoIntegerFeatures> integers;  // nullopt: missing
  std::array<std::string_view, kCriteoCategoricalFeatures> categories;  // empty: missing
};

// Parses one line (without its newline). INVALID_ARGUMENT naming `file`,
// `line_number` and the field for: a count of fields other than 40, a label
// that is not 0 or 1, an integer feature that is not a (possibly negative)
// base-10 int64.
Status ParseCriteoLine(std::string_view line, std::string_view file, uint64_t line_number,
                       CriteoRecord* record);

// The serialized tf.train.Example of `record`, replacing `*out`: the bytes
// protobuf's deterministic serialization gives (features in name order).
void CriteoExample(const CriteoRecord& record, std::string* out);

// Calls `fn` with every line of the file at `path` (1-based number, text
// without "\n" or "\r\n"); a last line without a newline counts, an empty
// file has no lines. Stops at the first error `fn` returns.
Status ForEachLine(const std::string& path,
                   const std::function<Status(uint64_t line_number, std::string_view line)>& fn);

// The files a source names: `src` itself if it is a file; if a directory,
// its regular files in name order, leaving out names that start with "." and
// JSON files (such as the truth file `criteo_synth` writes beside its TSV).
// NOT_FOUND if there are none.
StatusOr<std::vector<std::string>> CriteoSourceFiles(const std::string& src);

struct CriteoImportOptions {
  // A TSV file, or a directory of them (see CriteoSourceFiles); files are
  // read in order, as if concatenated. Gzipped files are refused: decompress
  // them first.
  std::string source;
  // Output: <output_dir>/data-0000K-of-0000N.<ext> (or <output_dir>/data.<ext>
  // when records_per_shard is 0).
  std::string output_dir;
  RecordWriterOptions writer;
  // Records per shard. Default 100000: a 45-million-line Kaggle train.txt
  // makes 459 shards. 0 writes one file.
  uint64_t records_per_shard = 100000;
};

struct CriteoImportResult {
  uint64_t records = 0;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// Reads the source twice: once to count its lines (the shard names need the
// total), once to convert. On error no output file is left behind.
StatusOr<CriteoImportResult> ImportCriteo(const CriteoImportOptions& options);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_CRITEO_IMPORT_H_
