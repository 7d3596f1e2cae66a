#include "data/mnist_import.h"

#include "common/compression.h"
#include "common/file.h"
#include "common/strings.h"
#include "data/sharded_writer.h"
#include "elasticdl/proto/example.pb.h"

namespace elasticdl {
namespace {

constexpr int kRows = 28;
constexpr int kCols = 28;
constexpr size_t kPixels = kRows * kCols;

uint32_t BigEndian32(std::string_view s, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[at + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

StatusOr<Idx> ReadIdx(const std::string& path, uint32_t want_dims) {
  EDL_ASSIGN_OR_RETURN(std::string compressed, ReadFileToString(path));
  std::string data;
  EDL_RETURN_IF_ERROR_WITH_CONTEXT(compression::GzipUncompress(compressed, size_t{1} << 31, &data),
                                   path);
  return ParseIdx(path, std::move(data), want_dims);
}

Status ImportSplit(const MnistImportOptions& options, const std::string& prefix,
                   const std::string& split, uint64_t* records, MnistImportResult* result) {
  const std::string images_path = StrCat(options.source_dir, "/", prefix, "-images-idx3-ubyte.gz");
  const std::string labels_path = StrCat(options.source_dir, "/", prefix, "-labels-idx1-ubyte.gz");
  EDL_ASSIGN_OR_RETURN(Idx images, ReadIdx(images_path, 3));
  EDL_ASSIGN_OR_RETURN(Idx labels, ReadIdx(labels_path, 1));
  if (images.dims[1] != kRows || images.dims[2] != kCols) {
    return absl::DataLossError(StrCat(images_path, ": images are ", images.dims[1], "x",
                                      images.dims[2], ", expected 28x28"));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::DataLossError(StrCat(images_path, " has ", images.dims[0], " images but ",
                                      labels_path, " has ", labels.dims[0], " labels"));
  }
  uint64_t n = images.dims[0];
  if (options.limit > 0 && options.limit < n) n = options.limit;
  std::string ext =
      RecordFormatName(options.writer.format) == "recordio" ? ".recordio" : ".tfrecord";
  std::string dst = StrCat(options.output_dir, "/", split, "/data", ext);
  EDL_ASSIGN_OR_RETURN(auto writer,
                       ShardedWriter::Create(dst, options.writer, options.records_per_shard, n));
  const auto* pixels = reinterpret_cast<const uint8_t*>(images.data.data() + images.header_size);
  const auto* label_bytes =
      reinterpret_cast<const uint8_t*>(labels.data.data() + labels.header_size);
  for (uint64_t i = 0; i < n; ++i) {
    EDL_RETURN_IF_ERROR(writer->Write(MnistExample(pixels + i * kPixels, label_bytes[i])));
  }
  EDL_RETURN_IF_ERROR(writer->Close());
  *records = n;
  result->outputs.insert(result->outputs.end(), writer->paths().begin(), writer->paths().end());
  return absl::OkStatus();
}

}  // namespace

StatusOr<Idx> ParseIdx(std::string_view name, std::string data, uint32_t want_dims) {
  Idx idx;
  idx.data = std::move(data);
  std::string_view d = idx.data;
  if (d.size() < 4 || d[0] != 0 || d[1] != 0 || static_cast<uint8_t>(d[2]) != 0x08) {
    return absl::DataLossError(
        StrCat(name, ": not an IDX file of unsigned bytes (bad magic at offset 0)"));
  }
  uint32_t ndims = static_cast<uint8_t>(d[3]);
  if (ndims != want_dims) {
    return absl::DataLossError(
        StrCat(name, ": IDX file has ", ndims, " dimensions, expected ", want_dims));
  }
  idx.header_size = 4 + 4 * size_t{ndims};
  if (d.size() < idx.header_size) {
    return absl::DataLossError(StrCat(name, ": truncated IDX header: needs ", idx.header_size,
                                      " bytes, file has ", d.size()));
  }
  uint64_t count = 1;
  for (uint32_t i = 0; i < ndims; ++i) {
    idx.dims.push_back(BigEndian32(d, 4 + 4 * i));
    if (__builtin_mul_overflow(count, uint64_t{idx.dims.back()}, &count)) {
      return absl::DataLossError(StrCat(name, ": IDX dimensions overflow"));
    }
  }
  if (d.size() - idx.header_size != count) {
    return absl::DataLossError(StrCat(name, ": IDX data holds ", d.size() - idx.header_size,
                                      " bytes, its header promises ", count));
  }
  return idx;
}

std::string MnistExample(const uint8_t* pixels, int64_t label) {
  proto::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  auto* image = features["image"].mutable_float_list();
  image->mutable_value()->Reserve(kPixels);
  for (size_t i = 0; i < kPixels; ++i) image->add_value(static_cast<float>(pixels[i]));
  features["label"].mutable_int64_list()->add_value(label);
  return example.SerializeAsString();
}

StatusOr<MnistImportResult> ImportMnist(const MnistImportOptions& options) {
  if (options.output_dir.empty()) {
    return absl::InvalidArgumentError("an output directory is required");
  }
  MnistImportResult result;
  EDL_RETURN_IF_ERROR(ImportSplit(options, "train", "train", &result.train_records, &result));
  EDL_RETURN_IF_ERROR(ImportSplit(options, "t10k", "test", &result.test_records, &result));
  return result;
}

}  // namespace elasticdl
