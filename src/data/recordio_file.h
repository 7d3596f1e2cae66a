// Opening RecordIO from any RandomAccessFile (files on disk, or memory in
// tests and fuzzers).
#ifndef ELASTICDL_DATA_RECORDIO_FILE_H_
#define ELASTICDL_DATA_RECORDIO_FILE_H_

#include <memory>

#include "common/file.h"
#include "elasticdl/data/recordio.h"

namespace elasticdl::recordio {

StatusOr<std::unique_ptr<RecordIOFile>> OpenFile(std::unique_ptr<RandomAccessFile> file,
                                                 const RecordFile::Options& options);

}  // namespace elasticdl::recordio

#endif  // ELASTICDL_DATA_RECORDIO_FILE_H_
