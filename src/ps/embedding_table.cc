#include "ps/embedding_table.h"

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "elasticdl/seed.h"
#include "elasticdl/zoo/optimizer.h"

namespace elasticdl::ps {
namespace {

using absl::StrCat;

// A uniform double in [0, 1) from 53 bits.
double Unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

Status ValidateInitializer(const proto::EmbeddingTableSpec& spec) {
  const proto::EmbeddingInitializer& init = spec.initializer();
  if (!std::isfinite(init.a()) || !std::isfinite(init.b())) {
    return absl::InvalidArgumentError(
        StrCat("embedding table '", spec.name(), "': the initializer's bounds must be finite"));
  }
  if (init.kind() == proto::EmbeddingInitializer::UNIFORM && !(init.a() < init.b())) {
    return absl::InvalidArgumentError(StrCat("embedding table '", spec.name(),
                                             "': a uniform initializer needs low < high, not [",
                                             init.a(), ", ", init.b(), ")"));
  }
  if (init.kind() == proto::EmbeddingInitializer::NORMAL && !(init.b() >= 0)) {
    return absl::InvalidArgumentError(StrCat("embedding table '", spec.name(),
                                             "': a normal initializer needs a standard deviation "
                                             ">= 0, not ",
                                             init.b()));
  }
  return absl::OkStatus();
}

// Adam's or AdamW's settings (the same message).
const proto::AdamConfig& AdamConfigOf(const proto::OptimizerConfig& optimizer) {
  return optimizer.has_adamw() ? optimizer.adamw() : optimizer.adam();
}

Status ValidateTableOptimizer(const proto::EmbeddingTableSpec& spec,
                              const proto::OptimizerConfig& config) {
  auto fail = [&](const std::string& what) -> Status {
    return absl::InvalidArgumentError(
        StrCat("embedding table '", spec.name(), "': optimizer: ", what));
  };
  if (config.kind_case() == proto::OptimizerConfig::kFtrl) {
    const proto::FtrlConfig& f = config.ftrl();
    if (!(f.lr() > 0)) return fail(StrCat("FTRL needs lr > 0, not ", f.lr()));
    if (!(f.lr_power() <= 0)) return fail(StrCat("FTRL needs lr_power <= 0, not ", f.lr_power()));
    if (!(f.l1() >= 0) || !(f.l2() >= 0)) return fail("FTRL needs l1 >= 0 and l2 >= 0");
    if (!(f.initial_accumulator_value() >= 0)) {
      return fail("FTRL needs initial_accumulator_value >= 0");
    }
    return absl::OkStatus();
  }
  StatusOr<OptimizerSpec> dense = ParseOptimizer(config.SerializeAsString());
  if (!dense.ok()) return fail(std::string(dense.status().message()));
  Status valid = ValidateOptimizer(*dense);
  if (!valid.ok()) return fail(std::string(valid.message()));
  return absl::OkStatus();
}

// Rows in chunks (no reallocation of what exists as a table grows), each
// row its values followed by its slots.
template <typename T>
class RowStorage {
 public:
  explicit RowStorage(size_t stride) : stride_(stride) {}

  size_t size() const { return size_; }
  T* at(size_t i) { return chunks_[i >> kShift].get() + (i & kMask) * stride_; }
  const T* at(size_t i) const { return chunks_[i >> kShift].get() + (i & kMask) * stride_; }

  T* Append() {
    if ((size_ >> kShift) == chunks_.size()) {
      chunks_.push_back(std::make_unique<T[]>((kMask + 1) * stride_));
    }
    return at(size_++);
  }
  // Moves the last row to `i` and drops the last.
  void RemoveBySwap(size_t i) {
    if (i + 1 != size_) std::memcpy(at(i), at(size_ - 1), stride_ * sizeof(T));
    --size_;
    // One spare chunk is kept, so that a table at a chunk's edge does not
    // free and allocate one on every row.
    const size_t needed = (size_ + kMask) >> kShift;
    while (chunks_.size() > needed + 1) chunks_.pop_back();
  }
  size_t capacity_bytes() const { return chunks_.size() * (kMask + 1) * stride_ * sizeof(T); }

 private:
  static constexpr size_t kShift = 14;
  static constexpr size_t kMask = (size_t{1} << kShift) - 1;
  const size_t stride_;
  size_t size_ = 0;
  std::vector<std::unique_ptr<T[]>> chunks_;
};

template <typename T>
class TypedTable final : public EmbeddingTable {
 public:
  TypedTable(proto::EmbeddingTableSpec spec, proto::OptimizerConfig optimizer)
      : EmbeddingTable(std::move(spec), std::move(optimizer)),
        dim_(static_cast<size_t>(spec_.dim())),
        slot_names_(SlotNames(optimizer_)),
        counts_steps_(CountsSteps(optimizer_)),
        tracks_updates_(spec_.evict_after_versions() > 0 || spec_.max_rows() > 0),
        rows_(dim_ * (1 + slot_names_.size())) {}

  size_t row_bytes() const override { return dim_ * sizeof(T); }

  void Read(const int64_t* ids, size_t n, char* out) const override {
    T* dst = reinterpret_cast<T*>(out);
    std::vector<size_t>& found = FindRows(ids, n);
    for (size_t i = 0; i < n; ++i, dst += dim_) {
      if (found[i] != kAbsent) {
        std::memcpy(dst, rows_.at(found[i]), dim_ * sizeof(T));
      } else if (spec_.admit_after() > 1) {
        std::fill(dst, dst + dim_, static_cast<T>(spec_.unadmitted_value()));
      } else {
        Initialize(ids[i], dst);
      }
    }
  }

  void Apply(const int64_t* ids, size_t n, const char* grads, double scale, int64_t version,
             double lr) override {
    const T* g = reinterpret_cast<const T*>(grads);
    std::vector<T> scaled(dim_);
    std::vector<size_t>& found = FindRows(ids, n);
    for (size_t i = 0; i < n; ++i, g += dim_) {
      size_t row = found[i];
      if (row == kAbsent) {
        if (!Admit(ids[i])) {
          ++dropped_gradients_;
          continue;
        }
        row = Create(ids[i]);
      }
      for (size_t k = 0; k < dim_; ++k) scaled[k] = static_cast<T>(g[k] * scale);
      Step(row, scaled.data(), lr);
      if (tracks_updates_) updated_[row] = version;
    }
    Evict(version);
  }

  void Sum(const std::vector<const proto::EmbeddingRows*>& parts,
           proto::EmbeddingRows* out) const override {
    absl::flat_hash_map<int64_t, size_t> position;
    std::vector<T> sum;
    for (const proto::EmbeddingRows* part : parts) {
      const T* g = reinterpret_cast<const T*>(part->values().data());
      for (int i = 0; i < part->ids_size(); ++i, g += dim_) {
        auto [it, inserted] = position.try_emplace(part->ids(i), position.size());
        if (inserted) {
          out->add_ids(part->ids(i));
          sum.insert(sum.end(), g, g + dim_);
        } else {
          T* row = sum.data() + it->second * dim_;
          for (size_t k = 0; k < dim_; ++k) row[k] += g[k];
        }
      }
    }
    out->set_values(reinterpret_cast<const char*>(sum.data()), sum.size() * sizeof(T));
  }

  std::vector<proto::EmbeddingRowBlock> Snapshot(size_t rows_per_block) const override {
    std::vector<proto::EmbeddingRowBlock> blocks;
    const size_t total = rows_.size();
    for (size_t begin = 0; begin < total; begin += rows_per_block) {
      const size_t end = std::min(total, begin + rows_per_block);
      proto::EmbeddingRowBlock& block = blocks.emplace_back();
      proto::EmbeddingRows* rows = block.mutable_rows();
      rows->set_table(spec_.name());
      rows->mutable_ids()->Reserve(static_cast<int>(end - begin));
      std::string values;
      values.resize((end - begin) * dim_ * sizeof(T));
      for (size_t r = begin; r < end; ++r) {
        rows->add_ids(ids_[r]);
        std::memcpy(values.data() + (r - begin) * dim_ * sizeof(T), rows_.at(r), dim_ * sizeof(T));
      }
      rows->set_values(std::move(values));
      for (size_t s = 0; s < slot_names_.size(); ++s) {
        proto::Tensor* slot = block.add_slots();
        slot->set_name(slot_names_[s]);
        slot->set_dtype(dtype());
        slot->add_shape(static_cast<int64_t>(end - begin));
        slot->add_shape(static_cast<int64_t>(dim_));
        std::string content;
        content.resize((end - begin) * dim_ * sizeof(T));
        for (size_t r = begin; r < end; ++r) {
          std::memcpy(content.data() + (r - begin) * dim_ * sizeof(T), rows_.at(r) + (1 + s) * dim_,
                      dim_ * sizeof(T));
        }
        slot->set_content(std::move(content));
      }
      if (counts_steps_) {
        for (size_t r = begin; r < end; ++r) block.add_steps(steps_[r]);
      }
    }
    return blocks;
  }

  Status Load(const proto::EmbeddingRowBlock& block, const std::function<bool(int64_t)>& keep,
              const proto::OptimizerConfig& written, int64_t version) override {
    const proto::EmbeddingRows& rows = block.rows();
    const size_t n = static_cast<size_t>(rows.ids_size());
    auto bad = [&](const std::string& what) -> Status {
      return absl::InvalidArgumentError(
          StrCat("embedding table '", spec_.name(), "': a checkpoint block ", what));
    };
    if (rows.values().size() != n * dim_ * sizeof(T)) {
      return bad(StrCat("holds ", rows.values().size(), " bytes of values for ", n,
                        " rows of dimension ", dim_));
    }
    // The slots carried over (the rest start as a new row's) and whether
    // the steps are.
    std::vector<const std::string*> slots(slot_names_.size(), nullptr);
    bool steps_apply = false;
    if (SlotsCarryOver(written, optimizer_)) {
      const std::vector<std::string> kept = SlotNames(written);
      for (size_t s = 0; s < slot_names_.size(); ++s) {
        if (std::find(kept.begin(), kept.end(), slot_names_[s]) == kept.end()) continue;
        for (const proto::Tensor& t : block.slots()) {
          if (t.name() == slot_names_[s]) slots[s] = &t.content();
        }
        if (slots[s] == nullptr || slots[s]->size() != n * dim_ * sizeof(T)) {
          return bad(StrCat("lacks slot '", slot_names_[s], "' for its ", n, " rows"));
        }
      }
      steps_apply = counts_steps_ && CountsSteps(written);
      if (steps_apply && static_cast<size_t>(block.steps_size()) != n) {
        return bad(StrCat("holds ", block.steps_size(), " step counts for ", n, " rows"));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = rows.ids(static_cast<int>(i));
      if (!keep(id)) continue;
      if (index_.contains(id)) return bad(StrCat("holds row ", id, " twice"));
      const size_t row = Create(id);
      T* r = rows_.at(row);
      std::memcpy(r, rows.values().data() + i * dim_ * sizeof(T), dim_ * sizeof(T));
      for (size_t s = 0; s < slots.size(); ++s) {
        if (slots[s] == nullptr) continue;  // Create's fresh slot
        std::memcpy(r + (1 + s) * dim_, slots[s]->data() + i * dim_ * sizeof(T), dim_ * sizeof(T));
      }
      if (steps_apply) steps_[row] = block.steps(static_cast<int>(i));
      if (tracks_updates_) updated_[row] = version;
    }
    return absl::OkStatus();
  }

  EmbeddingCounters counters() const override {
    EmbeddingCounters c;
    c.rows = static_cast<int64_t>(rows_.size());
    c.created = created_;
    c.evicted_by_age = evicted_by_age_;
    c.evicted_by_budget = evicted_by_budget_;
    c.awaiting_admission = static_cast<int64_t>(sightings_.size());
    c.dropped_gradients = dropped_gradients_;
    const size_t slot = sizeof(std::pair<int64_t, uint32_t>) + 1;  // flat_hash_map: entry + control
    c.bytes = static_cast<int64_t>(rows_.capacity_bytes() + ids_.capacity() * sizeof(int64_t) +
                                   steps_.capacity() * sizeof(int64_t) +
                                   updated_.capacity() * sizeof(int64_t) +
                                   index_.capacity() * slot + sightings_.capacity() * slot);
    return c;
  }

 private:
  proto::DataType dtype() const { return sizeof(T) == 4 ? proto::DT_FLOAT32 : proto::DT_FLOAT64; }

  static constexpr size_t kAbsent = ~size_t{0};

  // The rows of `ids` (kAbsent where none), their memory prefetched: the
  // lookups of a request are independent, so their cache misses overlap
  // instead of following one another row by row.
  std::vector<size_t>& FindRows(const int64_t* ids, size_t n) const {
    constexpr size_t kAhead = 8;  // lookups whose slots are fetched ahead
    found_.resize(n);
    for (size_t i = 0; i < std::min(n, kAhead); ++i) index_.prefetch(ids[i]);
    for (size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) index_.prefetch(ids[i + kAhead]);
      auto it = index_.find(ids[i]);
      found_[i] = it == index_.end() ? kAbsent : it->second;
      if (found_[i] != kAbsent) {
        __builtin_prefetch(rows_.at(found_[i]));
        if (counts_steps_) __builtin_prefetch(&steps_[found_[i]]);
      }
    }
    return found_;
  }

  void Initialize(int64_t id, T* out) const {
    const proto::EmbeddingInitializer& init = spec_.initializer();
    uint64_t state = SplitMix64(spec_.seed() ^ SplitMix64(static_cast<uint64_t>(id)));
    switch (init.kind()) {
      case proto::EmbeddingInitializer::ZEROS:
        std::fill(out, out + dim_, T(0));
        return;
      case proto::EmbeddingInitializer::CONSTANT:
        std::fill(out, out + dim_, static_cast<T>(init.a()));
        return;
      case proto::EmbeddingInitializer::NORMAL:
        for (size_t k = 0; k < dim_; k += 2) {
          // Box-Muller: two normals from two uniforms.
          const double u1 = 1.0 - Unit(state = SplitMix64(state));
          const double u2 = Unit(state = SplitMix64(state));
          const double r = std::sqrt(-2.0 * std::log(u1));
          out[k] = static_cast<T>(init.a() + init.b() * r * std::cos(2 * M_PI * u2));
          if (k + 1 < dim_) {
            out[k + 1] = static_cast<T>(init.a() + init.b() * r * std::sin(2 * M_PI * u2));
          }
        }
        return;
      case proto::EmbeddingInitializer::UNIFORM:
      default:
        for (size_t k = 0; k < dim_; ++k) {
          out[k] =
              static_cast<T>(init.a() + (init.b() - init.a()) * Unit(state = SplitMix64(state)));
        }
        return;
    }
  }

  // Whether a gradient for `id`, not held, creates its row now.
  bool Admit(int64_t id) {
    if (spec_.admit_after() <= 1) return true;
    auto [it, inserted] = sightings_.try_emplace(id, 0);
    if (++it->second < spec_.admit_after()) return false;
    sightings_.erase(it);
    return true;
  }

  // A new row for `id` at its initial value with fresh slots.
  size_t Create(int64_t id) {
    const size_t row = rows_.size();
    T* r = rows_.Append();
    Initialize(id, r);
    for (size_t s = 0; s < slot_names_.size(); ++s) {
      std::fill(r + (1 + s) * dim_, r + (2 + s) * dim_, static_cast<T>(InitialSlot(s)));
    }
    index_[id] = static_cast<uint32_t>(row);
    ids_.push_back(id);
    if (counts_steps_) steps_.push_back(0);
    if (tracks_updates_) updated_.push_back(0);
    ++created_;
    return row;
  }

  double InitialSlot(size_t s) const {
    if (optimizer_.has_adagrad() && s == 0) return optimizer_.adagrad().initial_accumulator_value();
    if (optimizer_.has_ftrl() && s == 0) return optimizer_.ftrl().initial_accumulator_value();
    return 0;
  }

  // One optimizer step on row `row` with gradient `g` (modified in place)
  // and learning rate `lr` (in place of the configuration's).
  void Step(size_t row, T* g, double lr) {
    T* w = rows_.at(row);
    T* slot = w + dim_;
    const size_t d = dim_;
    switch (optimizer_.kind_case()) {
      case proto::OptimizerConfig::kSgd: {
        const proto::SGDConfig& c = optimizer_.sgd();
        if (c.weight_decay() != 0) {
          for (size_t k = 0; k < d; ++k) g[k] += static_cast<T>(c.weight_decay()) * w[k];
        }
        if (c.momentum() != 0) {
          T* buf = slot;
          const T m = static_cast<T>(c.momentum());
          const T keep = static_cast<T>(1 - c.dampening());
          if (steps_[row]++ == 0) {
            std::copy(g, g + d, buf);
          } else {
            for (size_t k = 0; k < d; ++k) buf[k] = buf[k] * m + keep * g[k];
          }
          if (c.nesterov()) {
            for (size_t k = 0; k < d; ++k) g[k] += m * buf[k];
          } else {
            std::copy(buf, buf + d, g);
          }
        }
        const T rate = static_cast<T>(lr);
        for (size_t k = 0; k < d; ++k) w[k] += -rate * g[k];
        return;
      }
      case proto::OptimizerConfig::kAdam:
      case proto::OptimizerConfig::kAdamw: {
        // AdamW decays the row itself (only a row a step touches, as Adam's
        // moments move only for it), then steps as Adam without decay.
        const bool decoupled = optimizer_.has_adamw();
        const proto::AdamConfig& c = AdamConfigOf(optimizer_);
        T* m = slot;
        T* v = slot + d;
        const int64_t step = ++steps_[row];
        const double bc1 = 1 - std::pow(c.beta1(), static_cast<double>(step));
        const double bc2 = 1 - std::pow(c.beta2(), static_cast<double>(step));
        if (c.weight_decay() != 0 && decoupled) {
          const T keep = static_cast<T>(1 - lr * c.weight_decay());
          for (size_t k = 0; k < d; ++k) w[k] *= keep;
        } else if (c.weight_decay() != 0) {
          for (size_t k = 0; k < d; ++k) g[k] += static_cast<T>(c.weight_decay()) * w[k];
        }
        const T b1 = static_cast<T>(c.beta1());
        const T b2 = static_cast<T>(c.beta2());
        const T one_b1 = static_cast<T>(1 - c.beta1());
        const T one_b2 = static_cast<T>(1 - c.beta2());
        const T sqrt_bc2 = static_cast<T>(std::sqrt(bc2));
        const T eps = static_cast<T>(c.eps());
        const T step_size = static_cast<T>(lr / bc1);
        for (size_t k = 0; k < d; ++k) {
          m[k] = m[k] * b1 + g[k] * one_b1;
          v[k] = v[k] * b2 + one_b2 * g[k] * g[k];
          T second = v[k];
          if (c.amsgrad()) {
            T* vmax = slot + 2 * d;
            vmax[k] = std::max(vmax[k], v[k]);
            second = vmax[k];
          }
          const T denom = std::sqrt(second) / sqrt_bc2 + eps;
          w[k] += (-step_size * m[k]) / denom;
        }
        return;
      }
      case proto::OptimizerConfig::kAdagrad: {
        const proto::AdagradConfig& c = optimizer_.adagrad();
        T* sum = slot;
        const int64_t step = ++steps_[row];
        if (c.weight_decay() != 0) {
          for (size_t k = 0; k < d; ++k) g[k] += static_cast<T>(c.weight_decay()) * w[k];
        }
        const T clr = static_cast<T>(lr / (1 + static_cast<double>(step - 1) * c.lr_decay()));
        const T eps = static_cast<T>(c.eps());
        for (size_t k = 0; k < d; ++k) {
          sum[k] += g[k] * g[k];
          w[k] += (-clr * g[k]) / (std::sqrt(sum[k]) + eps);
        }
        return;
      }
      case proto::OptimizerConfig::kRmsprop: {
        const proto::RMSpropConfig& c = optimizer_.rmsprop();
        ++steps_[row];
        T* square_avg = slot;
        size_t next = 1;
        T* buf = c.momentum() > 0 ? slot + d * next++ : nullptr;
        T* grad_avg = c.centered() ? slot + d * next++ : nullptr;
        if (c.weight_decay() != 0) {
          for (size_t k = 0; k < d; ++k) g[k] += static_cast<T>(c.weight_decay()) * w[k];
        }
        const T alpha = static_cast<T>(c.alpha());
        const T one_alpha = static_cast<T>(1 - c.alpha());
        const T eps = static_cast<T>(c.eps());
        const T rate = static_cast<T>(lr);
        const T mom = static_cast<T>(c.momentum());
        for (size_t k = 0; k < d; ++k) {
          square_avg[k] = square_avg[k] * alpha + one_alpha * g[k] * g[k];
          T avg;
          if (grad_avg != nullptr) {
            grad_avg[k] = grad_avg[k] * alpha + g[k] * one_alpha;
            avg = std::sqrt(square_avg[k] + -grad_avg[k] * grad_avg[k]) + eps;
          } else {
            avg = std::sqrt(square_avg[k]) + eps;
          }
          if (buf != nullptr) {
            buf[k] = buf[k] * mom + g[k] / avg;
            w[k] += -rate * buf[k];
          } else {
            w[k] += (-rate * g[k]) / avg;
          }
        }
        return;
      }
      case proto::OptimizerConfig::kFtrl: {
        // McMahan et al., "Ad Click Prediction: a View from the Trenches",
        // algorithm 1, with a general learning-rate power. FTRL is a table's
        // own optimizer only (never the model's), so `lr` is its own, > 0.
        const proto::FtrlConfig& c = optimizer_.ftrl();
        T* n = slot;
        T* z = slot + d;
        const double p = -c.lr_power();
        for (size_t k = 0; k < d; ++k) {
          const double gk = g[k];
          const double n_new = static_cast<double>(n[k]) + gk * gk;
          const double sigma = (std::pow(n_new, p) - std::pow(static_cast<double>(n[k]), p)) / lr;
          const double z_new = static_cast<double>(z[k]) + gk - sigma * static_cast<double>(w[k]);
          n[k] = static_cast<T>(n_new);
          z[k] = static_cast<T>(z_new);
          if (std::abs(z_new) <= c.l1()) {
            w[k] = 0;
          } else {
            const double sign = z_new > 0 ? 1 : -1;
            w[k] = static_cast<T>((sign * c.l1() - z_new) / (std::pow(n_new, p) / lr + 2 * c.l2()));
          }
        }
        return;
      }
      case proto::OptimizerConfig::KIND_NOT_SET:
        return;
    }
  }

  void Evict(int64_t version) {
    if (!tracks_updates_) return;
    std::vector<size_t> victims;
    const int64_t age = spec_.evict_after_versions();
    if (age > 0 && version >= last_sweep_ + std::max<int64_t>(1, age / 4)) {
      last_sweep_ = version;
      for (size_t r = 0; r < rows_.size(); ++r) {
        if (updated_[r] < version - age) victims.push_back(r);
      }
      evicted_by_age_ += static_cast<int64_t>(victims.size());
      Remove(victims);
    }
    const size_t budget = static_cast<size_t>(spec_.max_rows());
    if (budget > 0 && rows_.size() > budget) {
      const size_t target = budget - budget / 16;
      std::vector<std::pair<int64_t, size_t>> by_update(rows_.size());
      for (size_t r = 0; r < rows_.size(); ++r) by_update[r] = {updated_[r], r};
      const size_t drop = rows_.size() - target;
      std::nth_element(by_update.begin(), by_update.begin() + static_cast<ptrdiff_t>(drop - 1),
                       by_update.end());
      victims.clear();
      for (size_t i = 0; i < drop; ++i) victims.push_back(by_update[i].second);
      evicted_by_budget_ += static_cast<int64_t>(victims.size());
      Remove(victims);
    }
  }

  // Drops rows (indices in any order), each by moving the last row into it.
  void Remove(std::vector<size_t>& victims) {
    std::sort(victims.begin(), victims.end(), std::greater<>());
    for (size_t r : victims) {
      const size_t last = rows_.size() - 1;
      index_.erase(ids_[r]);
      if (r != last) {
        ids_[r] = ids_[last];
        index_[ids_[r]] = static_cast<uint32_t>(r);
        if (counts_steps_) steps_[r] = steps_[last];
        updated_[r] = updated_[last];
      }
      rows_.RemoveBySwap(r);
      ids_.pop_back();
      if (counts_steps_) steps_.pop_back();
      updated_.pop_back();
    }
  }

  const size_t dim_;
  const std::vector<std::string> slot_names_;
  const bool counts_steps_;
  const bool tracks_updates_;
  RowStorage<T> rows_;
  absl::flat_hash_map<int64_t, uint32_t> index_;
  // FindRows's answer, kept to spare an allocation per request (calls are
  // serialized, Read's included).
  mutable std::vector<size_t> found_;
  // Per row (same index as rows_): its id, steps, and the version of its
  // last update (only with an eviction policy).
  std::vector<int64_t> ids_;
  std::vector<int64_t> steps_;
  std::vector<int64_t> updated_;
  // Admission: ids trained, not yet admitted -> minibatches seen.
  absl::flat_hash_map<int64_t, int32_t> sightings_;
  int64_t last_sweep_ = 0;
  int64_t created_ = 0;
  int64_t evicted_by_age_ = 0;
  int64_t evicted_by_budget_ = 0;
  int64_t dropped_gradients_ = 0;
};

}  // namespace

std::vector<std::string> SlotNames(const proto::OptimizerConfig& optimizer) {
  switch (optimizer.kind_case()) {
    case proto::OptimizerConfig::kSgd:
      if (optimizer.sgd().momentum() != 0) return {"momentum_buffer"};
      return {};
    case proto::OptimizerConfig::kAdam:
    case proto::OptimizerConfig::kAdamw:
      if (AdamConfigOf(optimizer).amsgrad()) {
        return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
      }
      return {"exp_avg", "exp_avg_sq"};
    case proto::OptimizerConfig::kAdagrad:
      return {"sum"};
    case proto::OptimizerConfig::kRmsprop: {
      std::vector<std::string> names = {"square_avg"};
      if (optimizer.rmsprop().momentum() > 0) names.push_back("momentum_buffer");
      if (optimizer.rmsprop().centered()) names.push_back("grad_avg");
      return names;
    }
    case proto::OptimizerConfig::kFtrl:
      return {"accum", "linear"};
    case proto::OptimizerConfig::KIND_NOT_SET:
      break;
  }
  return {};
}

bool SlotsCarryOver(const proto::OptimizerConfig& written, const proto::OptimizerConfig& now) {
  auto family = [](const proto::OptimizerConfig& c) {
    return c.kind_case() == proto::OptimizerConfig::kAdamw ? proto::OptimizerConfig::kAdam
                                                           : c.kind_case();
  };
  return written.kind_case() != proto::OptimizerConfig::KIND_NOT_SET &&
         family(written) == family(now);
}

double EmbeddingTable::base_lr() const {
  switch (optimizer_.kind_case()) {
    case proto::OptimizerConfig::kSgd:
      return optimizer_.sgd().lr();
    case proto::OptimizerConfig::kAdam:
    case proto::OptimizerConfig::kAdamw:
      return AdamConfigOf(optimizer_).lr();
    case proto::OptimizerConfig::kAdagrad:
      return optimizer_.adagrad().lr();
    case proto::OptimizerConfig::kRmsprop:
      return optimizer_.rmsprop().lr();
    case proto::OptimizerConfig::kFtrl:
      return optimizer_.ftrl().lr();
    case proto::OptimizerConfig::KIND_NOT_SET:
      break;
  }
  return 0;
}

bool CountsSteps(const proto::OptimizerConfig& optimizer) {
  return optimizer.has_adam() || optimizer.has_adamw() || optimizer.has_adagrad() ||
         optimizer.has_rmsprop() || (optimizer.has_sgd() && optimizer.sgd().momentum() != 0);
}

StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::Create(
    const proto::EmbeddingTableSpec& spec, const proto::OptimizerConfig& model_optimizer) {
  if (spec.name().empty()) return absl::InvalidArgumentError("an embedding table needs a name");
  if (spec.dim() < 1) {
    return absl::InvalidArgumentError(
        StrCat("embedding table '", spec.name(), "': dimension ", spec.dim(), ", expected >= 1"));
  }
  if (spec.num_rows() < 0 || spec.max_rows() < 0 || spec.evict_after_versions() < 0 ||
      spec.admit_after() < 0) {
    return absl::InvalidArgumentError(
        StrCat("embedding table '", spec.name(),
               "': num_rows, max_rows, evict_after_versions and admit_after must be >= 0"));
  }
  if (spec.max_rows() > int64_t{1} << 32) {
    return absl::InvalidArgumentError(
        StrCat("embedding table '", spec.name(), "': max_rows above 2^32 rows per server"));
  }
  EDL_RETURN_IF_ERROR(ValidateInitializer(spec));
  const proto::OptimizerConfig& optimizer =
      spec.has_optimizer() ? spec.optimizer() : model_optimizer;
  EDL_RETURN_IF_ERROR(ValidateTableOptimizer(spec, optimizer));
  switch (spec.dtype()) {
    case proto::DT_FLOAT32:
      return std::unique_ptr<EmbeddingTable>(std::make_unique<TypedTable<float>>(spec, optimizer));
    case proto::DT_FLOAT64:
      return std::unique_ptr<EmbeddingTable>(std::make_unique<TypedTable<double>>(spec, optimizer));
    default:
      return absl::InvalidArgumentError(StrCat("embedding table '", spec.name(), "': dtype ",
                                               proto::DataType_Name(spec.dtype()),
                                               ", expected DT_FLOAT32 or DT_FLOAT64"));
  }
}

}  // namespace elasticdl::ps
