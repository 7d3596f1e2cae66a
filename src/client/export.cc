#include "client/export.h"

#include <torch/serialize.h>

#include <filesystem>
#include <memory>

#include "common/file.h"
#include "common/strings.h"
#include "elasticdl/data/dataset.h"
#include "job/trained_model.h"
#include "master/data_source.h"
#include "python/python_zoo.h"
#include "python/torchscript.h"
#include "rpc/tensor_codec.h"
#include "zoo/embedding_spec.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_program.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;

// Every parameter, then every buffer, of `values`, by name.
StatusOr<ExportResult> WriteStateDict(const proto::ModelValues& values, const std::string& path) {
  c10::Dict<std::string, torch::Tensor> state;
  for (const auto* tensors : {&values.parameters(), &values.buffers()}) {
    for (const proto::Tensor& t : *tensors) {
      EDL_ASSIGN_OR_RETURN(torch::Tensor tensor, rpc::DecodeTensor(t));
      state.insert(t.name(), tensor);
    }
  }
  const std::vector<char> bytes = torch::pickle_save(state);
  EDL_RETURN_IF_ERROR(WriteFileAtomically(path, std::string(bytes.begin(), bytes.end())));
  ExportResult result;
  result.format = "state_dict";
  result.tensors = static_cast<int>(state.size());
  return result;
}

// Copies the trained values into the model's parameters and buffers.
StatusOr<int> LoadValues(const proto::ModelValues& values, Model& model) {
  torch::NoGradGuard no_grad;
  int copied = 0;
  for (bool buffers : {false, true}) {
    rpc::NamedTensors mine;
    for (const auto& item : buffers ? model.named_buffers() : model.named_parameters()) {
      mine[item.key()] = item.value();
    }
    for (const proto::Tensor& t : buffers ? values.buffers() : values.parameters()) {
      auto it = mine.find(t.name());
      if (it == mine.end()) {
        return absl::InvalidArgumentError(
            StrCat("the trained model's ", buffers ? "buffer" : "parameter", " '", t.name(),
                   "' is not one of the model's: does the zoo still define the model it was "
                   "trained as?"));
      }
      EDL_RETURN_IF_ERROR(rpc::CopyInto(t, it->second));
      ++copied;
    }
  }
  return copied;
}

// The first minibatch of `data` through the program's dataset_fn, in
// PREDICTION mode.
StatusOr<FeatureMap> ExampleBatch(const ZooProgram& program, const std::string& spec) {
  // A directory or glob, as the jobs' data flags take: its first file.
  StatusOr<std::vector<std::string>> files = master::ExpandDataPath(spec);
  if (!files.ok()) return Annotate(files.status(), "--data");
  const std::string& data = files->front();
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordFile> file, RecordFile::Open(data));
  const uint64_t records = std::min<uint64_t>(file->num_records(), 8);
  if (records == 0) return absl::InvalidArgumentError(StrCat("--data=", data, ": no records"));
  std::shared_ptr<const RecordFile> shared(std::move(file));
  EDL_ASSIGN_OR_RETURN(
      Dataset<Example> batches,
      program.MakeBatches(ReadRecords(shared, 0, records).with_seed(0), Mode::PREDICTION, records));
  StatusOr<std::optional<Example>> batch = batches.Next();
  if (!batch.ok()) return program.Annotate(batch.status(), EntryKind::kDatasetFn);
  if (!batch->has_value()) {
    return program.Annotate(absl::InvalidArgumentError(StrCat("yielded nothing for ", data)),
                            EntryKind::kDatasetFn);
  }
  return (**batch).features;
}

}  // namespace

StatusOr<ExportResult> ExportModel(const ExportOptions& options) {
  if (options.trained_model.empty())
    return absl::InvalidArgumentError("--trained_model is required");
  if (options.output.empty()) return absl::InvalidArgumentError("--output is required");
  EDL_ASSIGN_OR_RETURN(proto::TrainedModel record, ReadTrainedModelRecord(options.trained_model));
  EDL_ASSIGN_OR_RETURN(proto::ModelValues values, ReadModelValues(options.trained_model));
  const std::string output = AbsolutePath(options.output);
  const std::string zoo = options.trained_model + "/" + kZooDir;
  EDL_ASSIGN_OR_RETURN(EntryRef ref, ParseModelDef(record.model_def()));
  std::error_code ec;
  const bool python =
      fs::is_regular_file(zoo + "/" + ref.file.substr(0, ref.file.size() - 3) + ".py", ec);
  if (record.has_embedding_tables()) {
    return absl::FailedPreconditionError(
        StrCat(record.model_def(), " keeps embedding tables on parameter servers (",
               options.trained_model, "/", kEmbeddingsDir,
               "): ", python ? "TorchScript" : "a state_dict", " holds dense models only"));
  }
  if (!python) return WriteStateDict(values, output);

  EDL_ASSIGN_OR_RETURN(std::unique_ptr<ZooModules> modules, python::OpenPythonModules(zoo));
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<ZooLibrary> library,
                       ZooLibrary::Load("", std::move(modules)));
  ZooProgramNames names;
  names.model_def = record.model_def();
  names.dataset_fn = record.input_function();
  names.loss = record.loss();
  names.optimizer = record.optimizer();
  names.eval_metrics_fn = record.eval_metrics_fn();
  EDL_ASSIGN_OR_RETURN(ZooProgram program,
                       ZooProgram::Resolve(library, names, record.model_def_params()));
  EDL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, program.MakeModel());
  EDL_ASSIGN_OR_RETURN(std::vector<EmbeddingImpl*> tables, EmbeddingsOf(*model));
  if (!tables.empty()) {
    return absl::FailedPreconditionError(
        StrCat(record.model_def(), " has an embedding table on parameter servers ('",
               tables[0]->options().name(), "'): TorchScript holds dense models only"));
  }
  ExportResult result;
  EDL_ASSIGN_OR_RETURN(result.tensors, LoadValues(values, *model));
  std::optional<FeatureMap> example;
  if (!options.data.empty()) {
    EDL_ASSIGN_OR_RETURN(example, ExampleBatch(program, options.data));
  }
  StatusOr<python::TorchScriptSaved> saved =
      python::SaveTorchScript(*model, example ? &*example : nullptr, output);
  if (!saved.ok()) return program.Annotate(saved.status(), EntryKind::kModel);
  result.format = StrCat("TorchScript (", saved->method, ")");
  result.script_error = saved->script_error;
  return result;
}

}  // namespace elasticdl::client
