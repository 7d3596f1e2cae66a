#include "data/convert.h"

#include "common/strings.h"
#include "data/sharded_writer.h"

namespace elasticdl {

StatusOr<ConvertResult> Convert(const std::string& src, const std::string& dst,
                                const ConvertOptions& options) {
  RecordWriterOptions writer_options;
  if (options.to.has_value()) {
    writer_options.format = *options.to;
  } else {
    EDL_ASSIGN_OR_RETURN(writer_options.format, RecordFormatFromPath(dst));
  }
  writer_options.compressor = options.compressor;
  writer_options.max_chunk_bytes = options.max_chunk_bytes;
  ConvertResult result;

  if (!options.from.has_value() && HasSuffix(src, ".csv")) {
    EDL_ASSIGN_OR_RETURN(CsvSchema schema, ScanCsv(src, options.csv));
    EDL_ASSIGN_OR_RETURN(
        auto writer,
        ShardedWriter::Create(dst, writer_options, options.records_per_shard, schema.num_rows));
    EDL_RETURN_IF_ERROR(ConvertCsv(src, options.csv, schema,
                                   [&](std::string_view record) { return writer->Write(record); }));
    EDL_RETURN_IF_ERROR(writer->Close());
    result.records = schema.num_rows;
    result.outputs = writer->paths();
    return result;
  }

  EDL_ASSIGN_OR_RETURN(auto input, RecordFile::Open(src, options.from));
  EDL_ASSIGN_OR_RETURN(
      auto writer,
      ShardedWriter::Create(dst, writer_options, options.records_per_shard, input->num_records()));
  EDL_ASSIGN_OR_RETURN(auto scan, input->Scan(0, input->num_records()));
  while (scan->Next()) EDL_RETURN_IF_ERROR(writer->Write(scan->record()));
  EDL_RETURN_IF_ERROR(scan->status());
  EDL_RETURN_IF_ERROR(writer->Close());
  result.records = input->num_records();
  result.outputs = writer->paths();
  return result;
}

}  // namespace elasticdl
