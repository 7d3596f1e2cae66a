#include "elasticdl/data/dataset.h"

#include "common/strings.h"

namespace elasticdl {
namespace {

std::string ShapeOf(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

class RecordSource final : public internal::Source<Record> {
 public:
  RecordSource(std::shared_ptr<const RecordFile> file, uint64_t start, uint64_t end)
      : file_(std::move(file)),
        name_(std::make_shared<const std::string>(file_->path())),
        start_(start),
        end_(end) {}

  StatusOr<std::optional<Record>> Next() override {
    if (scanner_ == nullptr) {
      EDL_ASSIGN_OR_RETURN(scanner_, file_->Scan(start_, end_));
    }
    if (!scanner_->Next()) {
      EDL_RETURN_IF_ERROR(scanner_->status());
      return std::optional<Record>();
    }
    Record r;
    r.data.assign(scanner_->record().data(), scanner_->record().size());
    r.file = name_;
    r.index = scanner_->index();
    return std::optional<Record>(std::move(r));
  }

 private:
  std::shared_ptr<const RecordFile> file_;
  std::shared_ptr<const std::string> name_;
  uint64_t start_;
  uint64_t end_;
  std::unique_ptr<RecordScanner> scanner_;
};

}  // namespace

StatusOr<torch::Tensor> Collate<torch::Tensor>::Apply(std::vector<torch::Tensor>& items) {
  for (size_t i = 1; i < items.size(); ++i) {
    if (!items[i].sizes().equals(items[0].sizes()) ||
        items[i].scalar_type() != items[0].scalar_type()) {
      return absl::InvalidArgumentError(
          StrCat("cannot stack element ", i, " (", ShapeOf(items[i]), " ",
                 c10::toString(items[i].scalar_type()), ") onto element 0 (", ShapeOf(items[0]),
                 " ", c10::toString(items[0].scalar_type()),
                 "); the examples of a minibatch need one shape: pad or "
                 "cut ragged features to one length in a map"));
    }
  }
  return torch::stack(items);
}

StatusOr<FeatureMap> Collate<FeatureMap>::Apply(std::vector<FeatureMap>& items) {
  FeatureMap out;
  for (const auto& [name, first] : items[0]) {
    std::vector<torch::Tensor> column;
    column.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      auto it = items[i].find(name);
      if (it == items[i].end()) {
        return absl::InvalidArgumentError(
            StrCat("element ", i, " lacks feature '", name, "' that element 0 has"));
      }
      column.push_back(it->second);
    }
    StatusOr<torch::Tensor> stacked = Collate<torch::Tensor>::Apply(column);
    if (!stacked.ok()) return Annotate(stacked.status(), StrCat("feature '", name, "'"));
    out.emplace(name, std::move(*stacked));
  }
  for (size_t i = 1; i < items.size(); ++i) {
    if (items[i].size() != items[0].size()) {
      return absl::InvalidArgumentError(StrCat("element ", i, " has ", items[i].size(),
                                               " features, element 0 has ", items[0].size()));
    }
  }
  return out;
}

StatusOr<Example> Collate<Example>::Apply(std::vector<Example>& items) {
  std::vector<FeatureMap> features;
  std::vector<torch::Tensor> labels;
  std::vector<RecordOrigin> origins;
  bool traced = true;  // every item knows its records
  features.reserve(items.size());
  for (Example& e : items) {
    features.push_back(std::move(e.features));
    if (e.labels.defined()) labels.push_back(std::move(e.labels));
    traced = traced && !e.origins.empty();
    if (traced) origins.insert(origins.end(), e.origins.begin(), e.origins.end());
  }
  if (!labels.empty() && labels.size() != items.size()) {
    return absl::InvalidArgumentError("some elements have labels and some do not");
  }
  Example out;
  EDL_ASSIGN_OR_RETURN(out.features, Collate<FeatureMap>::Apply(features));
  if (!labels.empty()) {
    StatusOr<torch::Tensor> stacked = Collate<torch::Tensor>::Apply(labels);
    if (!stacked.ok()) return Annotate(stacked.status(), "labels");
    out.labels = std::move(*stacked);
  }
  if (traced) out.origins = std::move(origins);
  return out;
}

namespace internal {

std::string DescribeOrigin(const std::vector<RecordOrigin>& origins) {
  if (origins.empty()) return "unknown record";
  const RecordOrigin& o = origins.front();
  return o.file ? StrCat(*o.file, ": record ", o.index) : StrCat("record ", o.index);
}

}  // namespace internal

StatusOr<Features> ParseExampleBatch(const std::vector<Record>& records,
                                     const FeatureSpecMap& spec) {
  std::vector<std::string_view> views;
  views.reserve(records.size());
  for (const Record& r : records) views.emplace_back(r.data);
  StatusOr<Features> parsed = ParseExampleBatch(views, spec);
  if (parsed.ok()) return parsed;
  // Name the record: parse it alone to find which one failed.
  for (const Record& r : records) {
    Status s = ParseExample(r.data, spec).status();
    if (!s.ok()) {
      return Annotate(s, internal::DescribeOrigin({{r.file, r.index}}));
    }
  }
  return parsed.status();
}

Dataset<Record> ReadRecords(std::shared_ptr<const RecordFile> file, uint64_t start, uint64_t end) {
  return Dataset<Record>(std::make_shared<RecordSource>(std::move(file), start, end));
}

}  // namespace elasticdl
