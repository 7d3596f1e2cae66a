#include "data/cifar10_import.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>

#include "common/file.h"
#include "common/strings.h"
#include "data/sharded_writer.h"
#include "elasticdl/proto/example.pb.h"

namespace elasticdl {
namespace {

constexpr size_t kPlane = kCifar10Side * kCifar10Side;

// One binary file of a split and how many of its records are imported.
struct SourceFile {
  std::string path;
  uint64_t records = 0;
};

// The files of one split, checked to exist and to hold whole records.
struct Split {
  std::string name;  // "train" or "test": the output subdirectory
  std::vector<SourceFile> files;
  uint64_t records = 0;
};

// The number of records in the file at `path`, from its size.
StatusOr<uint64_t> CountRecords(const std::string& path) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return ErrnoToStatus(ec.value(), path);
  if (size == 0) return absl::DataLossError(StrCat(path, ": empty, holds no records"));
  if (size % kCifar10RecordBytes != 0) {
    uint64_t whole = size / kCifar10RecordBytes;
    return absl::DataLossError(StrCat(
        path, ": truncated: ", size, " bytes is not a whole number of ", kCifar10RecordBytes,
        "-byte records; record ", whole, " has only ", size % kCifar10RecordBytes, " bytes"));
  }
  return size / kCifar10RecordBytes;
}

// Finds the split's files in `dir`, applying `limit` (0: all records).
StatusOr<Split> PlanSplit(const std::string& dir, std::string name,
                          const std::vector<std::string_view>& file_names, uint64_t limit) {
  Split split;
  split.name = std::move(name);
  for (std::string_view file_name : file_names) {
    SourceFile file{StrCat(dir, "/", file_name)};
    EDL_ASSIGN_OR_RETURN(uint64_t count, CountRecords(file.path));
    file.records = count;
    if (limit > 0) {
      file.records = split.records >= limit ? 0 : std::min(count, limit - split.records);
    }
    split.records += file.records;
    if (file.records > 0) split.files.push_back(std::move(file));
  }
  return split;
}

// NOT_FOUND naming every one of the six files that `dir` lacks.
Status CheckAllFilesPresent(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(StrCat(dir, ": no such directory"));
  }
  std::vector<std::string_view> all(kCifar10TrainFiles.begin(), kCifar10TrainFiles.end());
  all.push_back(kCifar10TestFile);
  std::string missing;
  for (std::string_view name : all) {
    if (!std::filesystem::is_regular_file(StrCat(dir, "/", name), ec)) {
      missing += StrCat(missing.empty() ? "" : ", ", name);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::NotFoundError(StrCat(dir, ": missing ", missing,
                                    " (the CIFAR-10 binary version has data_batch_1.bin ... "
                                    "data_batch_5.bin and test_batch.bin)"));
}

// Writes the split's records; the caller closes the writer.
StatusOr<std::unique_ptr<ShardedWriter>> WriteSplit(const Cifar10ImportOptions& options,
                                                    const Split& split) {
  std::string ext =
      RecordFormatName(options.writer.format) == "recordio" ? ".recordio" : ".tfrecord";
  std::string dst = StrCat(options.output_dir, "/", split.name, "/data", ext);
  EDL_ASSIGN_OR_RETURN(
      auto writer,
      ShardedWriter::Create(dst, options.writer, options.records_per_shard, split.records));
  for (const SourceFile& file : split.files) {
    EDL_ASSIGN_OR_RETURN(std::string data, ReadFileToString(file.path));
    if (data.size() < file.records * kCifar10RecordBytes) {
      return absl::DataLossError(
          StrCat(file.path, ": shrank to ", data.size(), " bytes while being imported"));
    }
    std::string_view view = data;
    for (uint64_t i = 0; i < file.records; ++i) {
      EDL_ASSIGN_OR_RETURN(
          std::string example,
          Cifar10Example(file.path, i, view.substr(i * kCifar10RecordBytes, kCifar10RecordBytes)));
      EDL_RETURN_IF_ERROR(writer->Write(example));
    }
  }
  return writer;
}

}  // namespace

StatusOr<std::string> Cifar10Example(std::string_view file, uint64_t index,
                                     std::string_view record) {
  if (record.size() != kCifar10RecordBytes) {
    return absl::DataLossError(StrCat(file, ": record ", index, " has ", record.size(),
                                      " bytes, expected ", kCifar10RecordBytes));
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(record.data());
  if (bytes[0] >= kCifar10Classes) {
    return absl::DataLossError(StrCat(file, ": record ", index, " (byte offset ",
                                      index * kCifar10RecordBytes, "): label ",
                                      static_cast<int>(bytes[0]), " is not in 0..9"));
  }
  const uint8_t* pixels = bytes + 1;  // planes: red, green, blue; each row-major
  proto::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  auto* image = features["image"].mutable_float_list()->mutable_value();
  image->Resize(kCifar10Pixels, 0.0f);
  float* out = image->mutable_data();
  for (size_t p = 0; p < kPlane; ++p) {  // p = row * 32 + column
    for (size_t c = 0; c < kCifar10Channels; ++c) {
      out[p * kCifar10Channels + c] = static_cast<float>(pixels[c * kPlane + p]);
    }
  }
  features["label"].mutable_int64_list()->add_value(bytes[0]);
  return example.SerializeAsString();
}

StatusOr<Cifar10ImportResult> ImportCifar10(const Cifar10ImportOptions& options) {
  if (options.output_dir.empty()) {
    return absl::InvalidArgumentError("an output directory is required");
  }
  if (options.source_dir.empty()) {
    return absl::InvalidArgumentError("a source directory is required");
  }
  EDL_RETURN_IF_ERROR(CheckAllFilesPresent(options.source_dir));
  EDL_ASSIGN_OR_RETURN(
      Split train,
      PlanSplit(options.source_dir, "train", {kCifar10TrainFiles.begin(), kCifar10TrainFiles.end()},
                options.limit));
  EDL_ASSIGN_OR_RETURN(Split test,
                       PlanSplit(options.source_dir, "test", {kCifar10TestFile}, options.limit));

  // Both writers stay open until both splits are written: an error in the
  // test file leaves no training shards behind either.
  EDL_ASSIGN_OR_RETURN(auto train_writer, WriteSplit(options, train));
  EDL_ASSIGN_OR_RETURN(auto test_writer, WriteSplit(options, test));
  EDL_RETURN_IF_ERROR(train_writer->Close());
  EDL_RETURN_IF_ERROR(test_writer->Close());

  Cifar10ImportResult result;
  result.train_records = train.records;
  result.test_records = test.records;
  for (const auto* writer : {train_writer.get(), test_writer.get()}) {
    result.outputs.insert(result.outputs.end(), writer->paths().begin(), writer->paths().end());
  }
  return result;
}

}  // namespace elasticdl
