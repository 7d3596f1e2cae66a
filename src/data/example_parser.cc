#include <torch/types.h>

#include <stdexcept>

#include "common/strings.h"
#include "data/example_wire.h"
#include "elasticdl/data/example.h"

namespace elasticdl {
namespace {

using example::Kind;

Kind KindOf(FeatureSpec::Type type) {
  switch (type) {
    case FeatureSpec::Type::kFloat32:
      return Kind::kFloat;
    case FeatureSpec::Type::kInt64:
      return Kind::kInt64;
    case FeatureSpec::Type::kBytes:
      return Kind::kBytes;
  }
  return Kind::kNone;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

torch::Dtype TorchType(FeatureSpec::Type type) {
  return type == FeatureSpec::Type::kInt64 ? torch::kInt64 : torch::kFloat32;
}

// Sets the spec's type from a torch dtype, or records why it cannot.
void SetNumericType(torch::Dtype dtype, FeatureSpec* spec) {
  if (dtype == torch::kInt64) {
    spec->type = FeatureSpec::Type::kInt64;
  } else if (dtype == torch::kFloat32) {
    spec->type = FeatureSpec::Type::kFloat32;
  } else {
    spec->invalid = StrCat("dtype ", c10::toString(dtype),
                           " is not supported; use torch::kFloat32 (float_list) or "
                           "torch::kInt64 (int64_list), or a Bytes feature for bytes_list");
  }
}

// Per-thread scratch reused across records.
struct Scratch {
  std::vector<std::string_view> keys;
  std::vector<example::FeatureView> views;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
  std::vector<std::string_view> bytes;
};

Scratch& ThreadScratch(const FeatureSpecMap& spec) {
  thread_local Scratch scratch;
  scratch.keys.clear();
  for (const auto& [name, s] : spec) scratch.keys.push_back(name);
  return scratch;
}

// Decodes one feature's values into the scratch vectors (cleared first).
// Returns the number of values.
StatusOr<size_t> DecodeValues(const example::FeatureView& view, const FeatureSpec& spec,
                              Scratch* scratch) {
  scratch->floats.clear();
  scratch->int64s.clear();
  scratch->bytes.clear();
  if (!view.present || view.kind == Kind::kNone) {
    // An absent feature, or one with no list set, holds no values.
    return size_t{0};
  }
  switch (spec.type) {
    case FeatureSpec::Type::kFloat32:
      EDL_RETURN_IF_ERROR(example::AppendFloats(view, &scratch->floats));
      return scratch->floats.size();
    case FeatureSpec::Type::kInt64:
      EDL_RETURN_IF_ERROR(example::AppendInt64s(view, &scratch->int64s));
      return scratch->int64s.size();
    case FeatureSpec::Type::kBytes:
      EDL_RETURN_IF_ERROR(example::AppendBytes(view, &scratch->bytes));
      return scratch->bytes.size();
  }
  return size_t{0};
}

// Writes the decoded numeric values to `dst` (numel values of the spec type).
void CopyNumeric(const Scratch& scratch, const FeatureSpec& spec, void* dst) {
  if (spec.type == FeatureSpec::Type::kFloat32) {
    std::memcpy(dst, scratch.floats.data(), scratch.floats.size() * sizeof(float));
  } else {
    std::memcpy(dst, scratch.int64s.data(), scratch.int64s.size() * sizeof(int64_t));
  }
}

// Fills `dst` (num_elements values of the spec's type) from its default.
void CopyDefault(const FeatureSpec& spec, void* dst) {
  const int64_t n = spec.num_elements();
  torch::Tensor values =
      spec.default_value->reshape(-1).to(TorchType(spec.type)).expand({n}).contiguous();
  std::memcpy(dst, values.data_ptr(), n * values.element_size());
}

// A feature that is present and set must hold the list its spec reads.
Status CheckKind(const std::string& name, const example::FeatureView& view,
                 const FeatureSpec& spec) {
  if (view.present && view.kind != Kind::kNone && view.kind != KindOf(spec.type)) {
    return absl::InvalidArgumentError(StrCat("feature '", name, "' holds ",
                                             example::KindName(view.kind), ", expected ",
                                             example::KindName(KindOf(spec.type))));
  }
  return absl::OkStatus();
}

// Parses the value of one fixed-length feature of one record. Numeric values
// go to `dst` (room for num_elements values), bytes to `bytes_out`.
Status FixedValue(const std::string& name, const example::FeatureView& view,
                  const FeatureSpec& spec, Scratch* scratch, void* dst,
                  std::vector<std::string>* bytes_out) {
  EDL_RETURN_IF_ERROR(CheckKind(name, view, spec));
  EDL_ASSIGN_OR_RETURN(size_t n, DecodeValues(view, spec, scratch));
  const auto want = static_cast<size_t>(spec.num_elements());
  if (n == 0 && !view.present) {
    bool has_default = spec.default_value.has_value() || spec.default_bytes.has_value();
    if (!has_default) {
      return absl::InvalidArgumentError(
          StrCat("feature '", name, "' is missing and its spec has no default"));
    }
    if (spec.type == FeatureSpec::Type::kBytes) {
      const auto& d = *spec.default_bytes;
      for (size_t i = 0; i < want; ++i) bytes_out->push_back(d.size() == 1 ? d[0] : d[i]);
    } else {
      CopyDefault(spec, dst);
    }
    return absl::OkStatus();
  }
  if (n != want) {
    return absl::InvalidArgumentError(StrCat("feature '", name, "' has ", n, " values, expected ",
                                             want, " for shape ", ShapeString(spec.shape)));
  }
  if (spec.type == FeatureSpec::Type::kBytes) {
    for (std::string_view b : scratch->bytes) bytes_out->emplace_back(b);
  } else {
    CopyNumeric(*scratch, spec, dst);
  }
  return absl::OkStatus();
}

}  // namespace

int64_t FeatureSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

FeatureSpec FixedLenFeature(std::vector<int64_t> shape, torch::Dtype dtype,
                            std::optional<torch::Tensor> default_value) {
  FeatureSpec s;
  SetNumericType(dtype, &s);
  s.shape = std::move(shape);
  s.fixed_length = true;
  s.default_value = std::move(default_value);
  return s;
}

FeatureSpec FixedLenBytesFeature(std::vector<int64_t> shape,
                                 std::optional<std::vector<std::string>> default_value) {
  FeatureSpec s;
  s.type = FeatureSpec::Type::kBytes;
  s.shape = std::move(shape);
  s.default_bytes = std::move(default_value);
  return s;
}

FeatureSpec VarLenFeature(torch::Dtype dtype) {
  FeatureSpec s;
  SetNumericType(dtype, &s);
  s.fixed_length = false;
  return s;
}

FeatureSpec VarLenBytesFeature() {
  FeatureSpec s;
  s.type = FeatureSpec::Type::kBytes;
  s.fixed_length = false;
  return s;
}

const torch::Tensor& Features::operator[](const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::out_of_range("no tensor feature '" + name + "'");
  return it->second;
}

Status ValidateFeatureSpec(const FeatureSpecMap& spec) {
  for (const auto& [name, s] : spec) {
    if (!s.invalid.empty()) {
      return absl::InvalidArgumentError(StrCat("feature '", name, "': ", s.invalid));
    }
    for (int64_t d : s.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(StrCat("feature '", name, "': shape ",
                                                 ShapeString(s.shape),
                                                 " is invalid; dimensions must be >= 0"));
      }
    }
    if (s.default_value.has_value()) {
      if (!s.fixed_length || s.type == FeatureSpec::Type::kBytes) {
        return absl::InvalidArgumentError(StrCat(
            "feature '", name, "': only fixed-length numeric features take a tensor default"));
      }
      int64_t n = s.default_value->numel();
      if (n != 1 && n != s.num_elements()) {
        return absl::InvalidArgumentError(StrCat("feature '", name, "': default has ", n,
                                                 " values, expected 1 or ", s.num_elements()));
      }
    }
    if (s.default_bytes.has_value()) {
      auto n = static_cast<int64_t>(s.default_bytes->size());
      if (n != 1 && n != s.num_elements()) {
        return absl::InvalidArgumentError(StrCat("feature '", name, "': default has ", n,
                                                 " values, expected 1 or ", s.num_elements()));
      }
    }
  }
  return absl::OkStatus();
}

StatusOr<Features> ParseAllFeatures(std::string_view record) {
  std::vector<example::DecodedFeature> decoded;
  EDL_RETURN_IF_ERROR(example::DecodeAll(record, &decoded));
  Features out;
  for (example::DecodedFeature& f : decoded) {
    switch (f.kind) {
      case Kind::kFloat: {
        const auto n = static_cast<int64_t>(f.floats.size());
        out.tensors[f.key] = torch::from_blob(f.floats.data(), {n}, torch::kFloat32).clone();
        break;
      }
      case Kind::kInt64: {
        const auto n = static_cast<int64_t>(f.int64s.size());
        out.tensors[f.key] = torch::from_blob(f.int64s.data(), {n}, torch::kInt64).clone();
        break;
      }
      case Kind::kBytes:
        out.bytes[f.key] = std::move(f.bytes);
        break;
      case Kind::kNone:
        out.tensors[f.key] = torch::empty({0}, torch::kFloat32);
        break;
    }
  }
  return out;
}

StatusOr<Features> ParseExample(std::string_view record, const FeatureSpecMap& spec) {
  EDL_RETURN_IF_ERROR(ValidateFeatureSpec(spec));
  Scratch& scratch = ThreadScratch(spec);
  EDL_RETURN_IF_ERROR(example::FindFeatures(record, scratch.keys, &scratch.views));
  Features out;
  size_t i = 0;
  for (const auto& [name, s] : spec) {
    const example::FeatureView& view = scratch.views[i++];
    if (s.fixed_length) {
      torch::Tensor t;
      std::vector<std::string> bytes;
      if (s.type != FeatureSpec::Type::kBytes) t = torch::empty(s.shape, TorchType(s.type));
      EDL_RETURN_IF_ERROR(
          FixedValue(name, view, s, &scratch, t.defined() ? t.data_ptr() : nullptr, &bytes));
      if (s.type == FeatureSpec::Type::kBytes) {
        out.bytes[name] = std::move(bytes);
      } else {
        out.tensors[name] = std::move(t);
      }
      continue;
    }
    EDL_RETURN_IF_ERROR(CheckKind(name, view, s));
    EDL_ASSIGN_OR_RETURN(size_t n, DecodeValues(view, s, &scratch));
    if (s.type == FeatureSpec::Type::kBytes) {
      out.bytes[name].assign(scratch.bytes.begin(), scratch.bytes.end());
    } else {
      torch::Tensor t = torch::empty({static_cast<int64_t>(n)}, TorchType(s.type));
      if (n > 0) CopyNumeric(scratch, s, t.data_ptr());
      out.tensors[name] = std::move(t);
    }
  }
  return out;
}

StatusOr<Features> ParseExampleBatch(const std::vector<std::string_view>& records,
                                     const FeatureSpecMap& spec) {
  EDL_RETURN_IF_ERROR(ValidateFeatureSpec(spec));
  const auto batch = static_cast<int64_t>(records.size());
  Features out;
  // Fixed-length outputs are allocated up front and filled row by row.
  std::vector<torch::Tensor> fixed(spec.size());
  std::vector<std::vector<std::string>> bytes(spec.size());
  // Variable-length numeric outputs: (row, position) indices and values.
  std::vector<std::vector<int64_t>> var_rows(spec.size()), var_cols(spec.size());
  std::vector<std::vector<float>> var_floats(spec.size());
  std::vector<std::vector<int64_t>> var_int64s(spec.size());
  std::vector<int64_t> var_longest(spec.size(), 0);
  size_t i = 0;
  for (const auto& [name, s] : spec) {
    if (s.fixed_length && s.type != FeatureSpec::Type::kBytes) {
      std::vector<int64_t> shape{batch};
      shape.insert(shape.end(), s.shape.begin(), s.shape.end());
      fixed[i] = torch::empty(shape, TorchType(s.type));
    }
    if (!s.fixed_length && s.type == FeatureSpec::Type::kBytes) {
      return absl::InvalidArgumentError(
          StrCat("feature '", name,
                 "': variable-length bytes features cannot be parsed as a batch; "
                 "parse records one by one"));
    }
    ++i;
  }
  Scratch& scratch = ThreadScratch(spec);
  for (int64_t r = 0; r < batch; ++r) {
    Status status = example::FindFeatures(records[r], scratch.keys, &scratch.views);
    i = 0;
    for (const auto& [name, s] : spec) {
      if (!status.ok()) break;
      const example::FeatureView& view = scratch.views[i];
      if (s.fixed_length) {
        void* row = nullptr;
        if (fixed[i].defined()) {
          row = static_cast<char*>(fixed[i].data_ptr()) +
                r * s.num_elements() * fixed[i].element_size();
        }
        status = FixedValue(name, view, s, &scratch, row, &bytes[i]);
      } else {
        status = CheckKind(name, view, s);
        if (status.ok()) {
          StatusOr<size_t> n = DecodeValues(view, s, &scratch);
          status = n.status();
          if (status.ok()) {
            for (size_t k = 0; k < *n; ++k) {
              var_rows[i].push_back(r);
              var_cols[i].push_back(static_cast<int64_t>(k));
            }
            var_longest[i] = std::max<int64_t>(var_longest[i], static_cast<int64_t>(*n));
            var_floats[i].insert(var_floats[i].end(), scratch.floats.begin(), scratch.floats.end());
            var_int64s[i].insert(var_int64s[i].end(), scratch.int64s.begin(), scratch.int64s.end());
          }
        }
      }
      ++i;
    }
    EDL_RETURN_IF_ERROR_WITH_CONTEXT(status, StrCat("record ", r, " of the batch"));
  }
  i = 0;
  for (const auto& [name, s] : spec) {
    if (s.type == FeatureSpec::Type::kBytes) {
      out.bytes[name] = std::move(bytes[i]);
    } else if (s.fixed_length) {
      out.tensors[name] = std::move(fixed[i]);
    } else {
      auto nnz = static_cast<int64_t>(var_rows[i].size());
      torch::Tensor indices = torch::empty({2, nnz}, torch::kInt64);
      if (nnz > 0) {
        std::memcpy(indices[0].data_ptr(), var_rows[i].data(), nnz * sizeof(int64_t));
        std::memcpy(indices[1].data_ptr(), var_cols[i].data(), nnz * sizeof(int64_t));
      }
      torch::Tensor values =
          s.type == FeatureSpec::Type::kFloat32
              ? torch::from_blob(var_floats[i].data(), {nnz}, torch::kFloat32).clone()
              : torch::from_blob(var_int64s[i].data(), {nnz}, torch::kInt64).clone();
      out.tensors[name] =
          torch::sparse_coo_tensor(indices, values, {batch, var_longest[i]}).coalesce();
    }
    ++i;
  }
  return out;
}

}  // namespace elasticdl
