#include "cli/data_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command_support.h"
#include "data/cifar10_import.h"
#include "data/convert.h"
#include "data/criteo_import.h"
#include "data/criteo_synth.h"
#include "data/inspect.h"
#include "data/mnist_import.h"
#include "data/validate.h"
#include "master/data_source.h"
#include "sql/database.h"
#include "sql/query_export.h"

namespace elasticdl::cli {
namespace {

// Parses an optional --format style flag; empty leaves `*out` unset.
Status ParseFormatFlag(const std::string& value, std::optional<RecordFormat>* out) {
  if (value.empty()) return absl::OkStatus();
  EDL_ASSIGN_OR_RETURN(*out, ParseRecordFormat(value));
  return absl::OkStatus();
}

// Flag values as the user typed them, converted once the command runs.
struct WriterFlags {
  std::string format;
  std::string compressor = "snappy";
  size_t chunk_bytes = size_t{1} << 20;
  uint64_t records_per_shard = 0;
};

void AddWriterFlags(CLI::App* cmd, WriterFlags* flags, bool with_format) {
  if (with_format) {
    cmd->add_option("--to,--format", flags->format,
                    "Output format: recordio or tfrecord (default: from the output file's "
                    "extension; recordio for an output directory)");
  }
  cmd->add_option("--compressor", flags->compressor,
                  "RecordIO chunk compression: none, snappy or gzip")
      ->capture_default_str();
  cmd->add_option("--chunk_bytes", flags->chunk_bytes,
                  "RecordIO: close a chunk before its raw payload passes this many bytes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--records_per_shard", flags->records_per_shard,
                  "Split the output into files of this many records (0: one file)")
      ->check(NonNegativeInteger())
      ->capture_default_str();
}

StatusOr<RecordWriterOptions> WriterOptions(const WriterFlags& flags, RecordFormat default_format) {
  RecordWriterOptions options;
  options.format = default_format;
  if (!flags.format.empty()) {
    EDL_ASSIGN_OR_RETURN(options.format, ParseRecordFormat(flags.format));
  }
  EDL_ASSIGN_OR_RETURN(options.compressor, ParseCompressor(flags.compressor));
  options.max_chunk_bytes = flags.chunk_bytes;
  return options;
}

// An import's writer settings from its flags (RecordIO unless --format).
template <typename ImportOptions>
Status ApplyWriterFlags(const WriterFlags& flags, ImportOptions* options) {
  EDL_ASSIGN_OR_RETURN(options->writer, WriterOptions(flags, RecordFormat::kRecordIO));
  options->records_per_shard = flags.records_per_shard;
  return absl::OkStatus();
}

void AddConvert(CLI::App* data, int* exit_code) {
  struct Flags {
    std::string src, dst, from;
    WriterFlags writer;
    std::string csv_delimiter = ",";
    std::string csv_types;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = data->add_subcommand(
      "convert",
      "Copy records between RecordIO and TFRecord (byte for byte, in order), or turn a CSV "
      "file into tf.train.Example records");
  cmd->add_option("SRC", flags->src, "Source: .recordio, .tfrecord or .csv file")->required();
  cmd->add_option("DST", flags->dst, "Destination: .recordio or .tfrecord file")->required();
  cmd->add_option("--from", flags->from,
                  "Source format: recordio or tfrecord (default: from SRC's extension)");
  AddWriterFlags(cmd, &flags->writer, /*with_format=*/true);
  cmd->add_option("--csv_delimiter", flags->csv_delimiter, "CSV field separator")
      ->capture_default_str();
  cmd->add_option("--csv_types", flags->csv_types,
                  "CSV column types overriding inference: NAME:TYPE,... (int64, float, bytes)");
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      ConvertOptions options;
      if (Status s = ParseFormatFlag(flags->from, &options.from); !s.ok()) return ReportError(s);
      if (Status s = ParseFormatFlag(flags->writer.format, &options.to); !s.ok())
        return ReportError(s);
      auto compressor = ParseCompressor(flags->writer.compressor);
      if (!compressor.ok()) return ReportError(compressor.status());
      options.compressor = *compressor;
      options.max_chunk_bytes = flags->writer.chunk_bytes;
      options.records_per_shard = flags->writer.records_per_shard;
      if (flags->csv_delimiter.size() != 1) {
        return ReportError(absl::InvalidArgumentError("--csv_delimiter must be one character"));
      }
      options.csv.delimiter = flags->csv_delimiter[0];
      auto types = ParseColumnTypes(flags->csv_types);
      if (!types.ok()) return ReportError(Annotate(types.status(), "--csv_types"));
      options.csv.column_types = *types;
      auto result = Convert(flags->src, flags->dst, options);
      if (!result.ok()) return ReportError(result.status());
      fmt::print("converted {} records from {} into {} file{}\n", result->records, flags->src,
                 result->outputs.size(), result->outputs.size() == 1 ? "" : "s");
      for (const auto& p : result->outputs) fmt::print("  {}\n", p);
      return kExitOk;
    }();
  });
}

void AddMnist(CLI::App* data, int* exit_code) {
  struct Flags {
    MnistImportOptions options;
    WriterFlags writer;
  };
  auto flags = std::make_shared<Flags>();
  flags->writer.records_per_shard = flags->options.records_per_shard;
  CLI::App* cmd = data->add_subcommand(
      "mnist",
      "Convert (Fashion-)MNIST IDX files into shards of tf.train.Example records "
      "(image float[28,28] 0-255, label int64[1])");
  cmd->add_option("--output", flags->options.output_dir,
                  "Output directory; gets train/ and test/ shards")
      ->required();
  cmd->add_option("--source", flags->options.source_dir,
                  "Directory with the four *-idx*-ubyte.gz files")
      ->capture_default_str();
  cmd->add_option("--limit", flags->options.limit, "Only the first N images of each split (0: all)")
      ->check(NonNegativeInteger())
      ->capture_default_str();
  AddWriterFlags(cmd, &flags->writer, /*with_format=*/true);
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      MnistImportOptions options = flags->options;
      if (Status s = ApplyWriterFlags(flags->writer, &options); !s.ok()) return ReportError(s);
      auto result = ImportMnist(options);
      if (!result.ok()) return ReportError(result.status());
      fmt::print("wrote {} training and {} test examples from {} into {} files under {}\n",
                 result->train_records, result->test_records, options.source_dir,
                 result->outputs.size(), options.output_dir);
      return kExitOk;
    }();
  });
}

void AddCifar10(CLI::App* data, int* exit_code) {
  struct Flags {
    Cifar10ImportOptions options;
    WriterFlags writer;
  };
  auto flags = std::make_shared<Flags>();
  flags->writer.records_per_shard = flags->options.records_per_shard;
  CLI::App* cmd = data->add_subcommand(
      "cifar10",
      "Convert CIFAR-10's binary files into shards of tf.train.Example records "
      "(image float[32,32,3] 0-255 in HWC order, label int64[1])");
  cmd->add_option("--output", flags->options.output_dir,
                  "Output directory; gets train/ and test/ shards")
      ->required();
  cmd->add_option("--source,--input", flags->options.source_dir,
                  "Directory with data_batch_1.bin ... data_batch_5.bin and test_batch.bin")
      ->required();
  cmd->add_option("--limit", flags->options.limit, "Only the first N images of each split (0: all)")
      ->check(NonNegativeInteger())
      ->capture_default_str();
  AddWriterFlags(cmd, &flags->writer, /*with_format=*/true);
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      Cifar10ImportOptions options = flags->options;
      if (Status s = ApplyWriterFlags(flags->writer, &options); !s.ok()) return ReportError(s);
      auto result = ImportCifar10(options);
      if (!result.ok()) return ReportError(result.status());
      fmt::print("wrote {} training and {} test examples from {} into {} files under {}\n",
                 result->train_records, result->test_records, options.source_dir,
                 result->outputs.size(), options.output_dir);
      return kExitOk;
    }();
  });
}

void AddCriteo(CLI::App* data, int* exit_code) {
  struct Flags {
    CriteoImportOptions options;
    WriterFlags writer;
  };
  auto flags = std::make_shared<Flags>();
  flags->writer.records_per_shard = flags->options.records_per_shard;
  CLI::App* cmd = data->add_subcommand(
      "criteo",
      "Convert Criteo click logs (TSV: label, I1..I13, C1..C26) into shards of tf.train.Example "
      "records (label, I1..I13 int64[1]; C1..C26 bytes[1]; missing fields left out)");
  cmd->add_option("SRC", flags->options.source,
                  "A TSV file, or a directory whose files are read in name order")
      ->required();
  cmd->add_option("DST_DIR", flags->options.output_dir,
                  "Output directory; gets data-0000K-of-0000N.recordio (or .tfrecord)")
      ->required();
  AddWriterFlags(cmd, &flags->writer, /*with_format=*/true);
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      CriteoImportOptions options = flags->options;
      if (Status s = ApplyWriterFlags(flags->writer, &options); !s.ok()) return ReportError(s);
      auto result = ImportCriteo(options);
      if (!result.ok()) return ReportError(result.status());
      fmt::print("wrote {} examples from {} file{} into {} file{} under {}\n", result->records,
                 result->inputs.size(), result->inputs.size() == 1 ? "" : "s",
                 result->outputs.size(), result->outputs.size() == 1 ? "" : "s",
                 options.output_dir);
      return kExitOk;
    }();
  });
}

void AddCriteoSynth(CLI::App* data, int* exit_code) {
  auto options = std::make_shared<CriteoSynthOptions>();
  CLI::App* cmd = data->add_subcommand(
      "criteo_synth",
      "Write Criteo-format TSV drawn from a hidden factorisation machine, and beside it "
      "DST.truth.json with the click rate and the optimum AUC and log-loss");
  cmd->add_option("DST", options->output, "The TSV file to write")->required();
  cmd->add_option("--records", options->records, "Lines to write")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", options->seed,
                  "Seed of the hidden model, the hex strings and the draws")
      ->check(NonNegativeInteger())
      ->capture_default_str();
  cmd->add_option("--test_records", options->test_records,
                  "Lines of a held-out file from the same hidden model (needs --test_output)")
      ->check(NonNegativeInteger())
      ->capture_default_str();
  cmd->add_option("--test_output", options->test_output,
                  "The held-out TSV file (gets its own .truth.json)");
  cmd->add_option("--zipf", options->zipf, "Zipf exponent of the categorical values")
      ->capture_default_str();
  cmd->add_option("--vocabulary_scale", options->vocabulary_scale,
                  "Multiplies every field's vocabulary (1: about 600,000 ids in all)")
      ->capture_default_str();
  cmd->add_option("--click_rate", options->click_rate, "Mean click probability")
      ->capture_default_str();
  cmd->add_option("--logit_stddev", options->logit_stddev,
                  "Spread of the true logits: the signal's strength (higher: higher optimum AUC)")
      ->capture_default_str();
  cmd->callback([options, exit_code] {
    *exit_code = [&]() -> int {
      auto truths = SynthesizeCriteo(*options);
      if (!truths.ok()) return ReportError(truths.status());
      for (const CriteoSynthTruth& t : *truths) {
        fmt::print(
            "wrote {} line{} to {}: click rate {:.4f}, optimum AUC {}, optimum log-loss {:.4f} "
            "(constant {:.4f}); truth in {}\n",
            t.records, t.records == 1 ? "" : "s", t.file, t.click_rate,
            t.optimum_auc.has_value() ? fmt::format("{:.4f}", *t.optimum_auc) : "undefined",
            t.optimum_log_loss, t.constant_log_loss, t.truth_file);
      }
      return kExitOk;
    }();
  });
}

void AddInspect(CLI::App* data, int* exit_code) {
  struct Flags {
    std::string path, format;
    InspectOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = data->add_subcommand(
      "inspect",
      "Show a record file's record count, chunks and compression, and first examples; for a "
      "directory or glob, each file's record count");
  cmd->add_option("PATH", flags->path,
                  "A .recordio or .tfrecord file, or a directory or glob of them as "
                  "--training_data takes it")
      ->required();
  cmd->add_option("--format", flags->format, "recordio or tfrecord (default: from the extension)");
  cmd->add_option("-n,--records", flags->options.num_records, "How many records to show")
      ->check(NonNegativeInteger())
      ->capture_default_str();
  cmd->add_option("--max_values", flags->options.max_values, "Values shown per feature")
      ->check(NonNegativeInteger())
      ->capture_default_str();
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      InspectOptions options = flags->options;
      if (Status s = ParseFormatFlag(flags->format, &options.format); !s.ok())
        return ReportError(s);
      std::error_code ec;
      if (std::filesystem::is_directory(flags->path, ec) ||
          flags->path.find_first_of("*?[") != std::string::npos) {
        auto files = master::ExpandDataPath(flags->path);
        if (!files.ok()) return ReportError(files.status());
        FilesReport report = InspectFiles(flags->path, *files, options);
        fmt::print("{}", report.text);
        std::fflush(stdout);
        int code = kExitOk;
        for (const Status& problem : report.problems) code = ReportError(problem);
        return code;
      }
      auto report = Inspect(flags->path, options);
      if (!report.ok()) return ReportError(report.status());
      fmt::print("{}", *report);
      return kExitOk;
    }();
  });
}

void AddValidate(CLI::App* data, int* exit_code) {
  struct Flags {
    std::vector<std::string> paths;
    std::string format;
    ValidateOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = data->add_subcommand(
      "validate", "Scan record files and report every corrupt spot (file, offset); exit 1 if any");
  cmd->add_option("FILE", flags->paths, "Record files")->required();
  cmd->add_option("--format", flags->format, "recordio or tfrecord (default: from extensions)");
  cmd->add_flag("--examples", flags->options.examples,
                "Also check that every record is a well-formed tf.train.Example");
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      ValidateOptions options = flags->options;
      if (Status s = ParseFormatFlag(flags->format, &options.format); !s.ok())
        return ReportError(s);
      int code = kExitOk;
      for (const std::string& path : flags->paths) {
        auto report = ValidateFile(path, options);
        if (!report.ok()) {
          code = ReportError(report.status());
          continue;
        }
        for (const Finding& f : report->findings) {
          fmt::print("{}: offset {}: {}\n", path, f.offset, f.problem);
        }
        if (report->findings.empty()) {
          fmt::print("{}: ok, {} records{}\n", path, report->good_records,
                     report->chunks > 0 ? fmt::format(" in {} chunks", report->chunks) : "");
        } else {
          fmt::print("{}: {} problem{}, {} intact records\n", path, report->findings.size(),
                     report->findings.size() == 1 ? "" : "s", report->good_records);
          code = kExitFailure;
        }
      }
      return code;
    }();
  });
}

}  // namespace

void AddSql(CLI::App* data, int* exit_code) {
  struct Flags {
    std::string db, select;
    sql::QueryExportOptions options;
    WriterFlags writer;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = data->add_subcommand(
      "sql",
      "Run a SELECT on a database and write its rows as tf.train.Example records, one feature "
      "per column (int64, float or bytes, from the column's type or else its values; NULL "
      "left out)");
  cmd->add_option("--db", flags->db,
                  "The database: sqlite:///path/to.db or postgresql://user@host:port/db")
      ->required();
  cmd->add_option("SELECT", flags->select, "The query, one SELECT statement")->required();
  cmd->add_option("DST_DIR", flags->options.output_dir,
                  "Output directory; gets data.recordio, or data-0000K-of-0000N.recordio with "
                  "--records_per_shard")
      ->required();
  AddWriterFlags(cmd, &flags->writer, /*with_format=*/true);
  cmd->callback([flags, exit_code] {
    *exit_code = [&]() -> int {
      sql::QueryExportOptions options = flags->options;
      if (Status s = ApplyWriterFlags(flags->writer, &options); !s.ok()) return ReportError(s);
      auto db = sql::Database::Open(flags->db);
      if (!db.ok()) return ReportError(db.status());
      auto result = sql::ExportQuery(db->get(), flags->select, options);
      if (!result.ok()) return ReportError(result.status());
      std::string columns;
      for (const sql::ExportedColumn& c : result->columns) {
        columns +=
            fmt::format("{}{}:{}", columns.empty() ? "" : ", ", c.name, example::KindName(c.kind));
      }
      fmt::print("wrote {} examples ({}) into {} file{} under {}\n", result->records, columns,
                 result->outputs.size(), result->outputs.size() == 1 ? "" : "s",
                 options.output_dir);
      return kExitOk;
    }();
  });
}

void AddDataCommand(CLI::App* app, int* exit_code) {
  CLI::App* data = app->add_subcommand("data", "Record files: convert, import, inspect, validate");
  data->require_subcommand(1);
  AddConvert(data, exit_code);
  AddMnist(data, exit_code);
  AddCifar10(data, exit_code);
  AddCriteo(data, exit_code);
  AddCriteoSynth(data, exit_code);
  AddSql(data, exit_code);
  AddInspect(data, exit_code);
  AddValidate(data, exit_code);
}

}  // namespace elasticdl::cli
