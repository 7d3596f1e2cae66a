// Lazy datasets for model files: the C++ form of the tf.data pipeline a
// modeler's dataset_fn builds (seed 001), with the worker threads and queue
// bound of seed 004's data loaders.
//
//   Dataset<Example> dataset_fn(Dataset<Record> records, Mode mode) {
//     return records
//         .map([](const Record& r) { return ParseMnist(r); }, MapOptions().workers(2))
//         .shuffle(1024)
//         .batch(64)
//         .prefetch(2);
//   }
//
// A Dataset is a handle to a pipeline stage; methods return new stages and
// leave the receiver usable as a handle to the old one, but every stage is a
// stream that is consumed once: iterate a pipeline from one thread, once.
//
// Randomness: a pipeline may carry a seed (with_seed; the worker seeds the
// records of every task from the job's --seed, the epoch and the task), and
// every stage derives its own from its input's. A seeded pipeline is
// deterministic: shuffle() without an explicit seed draws from the stage's
// seed, and a map function that takes a second argument `at::Generator&`
// gets a generator seeded from the stage's seed and the element's position,
// so that the same records give the same elements on every run and every
// attempt of a task, on any number of map threads:
//
//   records.map([](const Record& r, at::Generator& gen) {
//     ... torch::rand({1}, gen) ...        // a random augmentation
//   }, MapOptions().workers(2));
//
// An unseeded pipeline (FromVector, ReadRecords) draws its seeds from
// std::random_device.
//
// Errors: Next() returns a status instead of an element when a stage fails:
// a corrupt record, a map function returning an error status or throwing
// (c10::Error included), tensors that cannot be collated. The message names
// the element's position in the stream. Range-for iteration throws
// DatasetError carrying that status.
#ifndef ELASTICDL_DATA_DATASET_H_
#define ELASTICDL_DATA_DATASET_H_

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "elasticdl/data/example.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/seed.h"
#include "elasticdl/status.h"

namespace elasticdl {

// One raw record and where it came from.
struct Record {
  std::string data;
  // The file it was read from (shared by all records of the file) and its
  // index there.
  std::shared_ptr<const std::string> file;
  uint64_t index = 0;
};

// Where an element came from: a record's file and its index there.
struct RecordOrigin {
  std::shared_ptr<const std::string> file;
  uint64_t index = 0;
};

// A model input: named feature tensors and (except in prediction) labels.
struct Example {
  Example() = default;
  Example(FeatureMap features, torch::Tensor labels = {})
      : features(std::move(features)), labels(std::move(labels)) {}

  FeatureMap features;
  torch::Tensor labels;
  // The records it was made from, one per example (a batch: one per row,
  // in order). Set by Dataset::map from records (or from a group of them)
  // when the function leaves it empty; batch() concatenates. Errors about
  // a row of a minibatch name its record with it; empty when the pipeline
  // lost track (then they name the task).
  std::vector<RecordOrigin> origins;
};

// Thrown by range-for iteration when the pipeline fails.
class DatasetError : public std::runtime_error {
 public:
  explicit DatasetError(Status status)
      : std::runtime_error(std::string(status.message())), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Options for Dataset::map with worker threads.
class MapOptions {
 public:
  // Threads applying the function. 0 runs it inline on the consumer's thread.
  // Default 0.
  MapOptions& workers(size_t n) {
    workers_ = n;
    return *this;
  }
  // Results computed ahead of the consumer, at most. Bounds memory. Default 10
  // (seed 004's max_queue_size).
  MapOptions& max_queue_size(size_t n) {
    max_queue_size_ = n;
    return *this;
  }
  size_t workers() const { return workers_; }
  size_t max_queue_size() const { return max_queue_size_; }

 private:
  size_t workers_ = 0;
  size_t max_queue_size_ = 10;
};

// Stacking elements into a batch. Specialized for tensors, feature maps and
// Examples; specialize it for your own element types to batch them.
template <typename T>
struct Collate;

template <>
struct Collate<torch::Tensor> {
  static StatusOr<torch::Tensor> Apply(std::vector<torch::Tensor>& items);
};
template <>
struct Collate<FeatureMap> {
  static StatusOr<FeatureMap> Apply(std::vector<FeatureMap>& items);
};
template <>
struct Collate<Example> {
  static StatusOr<Example> Apply(std::vector<Example>& items);
};

namespace internal {

// A stage of a pipeline: yields elements until it returns nullopt.
template <typename T>
class Source {
 public:
  virtual ~Source() = default;
  virtual StatusOr<std::optional<T>> Next() = 0;
};

template <typename T>
struct UnwrapStatusOr {
  using type = T;
};
template <typename T>
struct UnwrapStatusOr<StatusOr<T>> {
  using type = T;
};

// Calls fn(x), turning an error status or an exception into a status.
template <typename R, typename F, typename T>
StatusOr<R> CallUserFunction(F& fn, T&& x, uint64_t position) {
  try {
    return fn(std::forward<T>(x));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError("element " + std::to_string(position) +
                                      ": function threw: " + e.what());
  }
}

// Map functions take the element, or the element and a generator.
template <typename F, typename T>
constexpr bool kTakesGenerator = std::is_invocable_v<F&, T&&, at::Generator&>;

template <typename R>
struct TypeTag {
  using type = R;
};
template <typename F, typename T>
auto MapResultOf() {
  if constexpr (kTakesGenerator<F, T>) {
    return TypeTag<std::decay_t<std::invoke_result_t<F&, T&&, at::Generator&>>>();
  } else {
    return TypeTag<std::decay_t<std::invoke_result_t<F&, T&&>>>();
  }
}
// What a map function returns, StatusOr unwrapped.
template <typename F, typename T>
using MapOutput = typename UnwrapStatusOr<typename decltype(MapResultOf<F, T>())::type>::type;

// fn(x) or fn(x, generator seeded from (seed, position)), as CallUserFunction.
template <typename U, typename F, typename T>
StatusOr<U> CallMapFunctionOnce(F& fn, T&& x, uint64_t seed, uint64_t position) {
  if constexpr (kTakesGenerator<F, T>) {
    auto with_generator = [&fn, seed, position](T&& v) {
      at::Generator generator = at::detail::createCPUGenerator(SeedMix(seed, position));
      return fn(std::forward<T>(v), generator);
    };
    return CallUserFunction<U>(with_generator, std::forward<T>(x), position);
  } else {
    return CallUserFunction<U>(fn, std::forward<T>(x), position);
  }
}

// The origins of a record, or of a group of them.
inline std::vector<RecordOrigin> OriginsOf(const Record& r) { return {{r.file, r.index}}; }
inline std::vector<RecordOrigin> OriginsOf(const std::vector<Record>& group) {
  std::vector<RecordOrigin> origins;
  origins.reserve(group.size());
  for (const Record& r : group) origins.push_back({r.file, r.index});
  return origins;
}
// "FILE: record N" (of several: the first's).
std::string DescribeOrigin(const std::vector<RecordOrigin>& origins);

// CallMapFunctionOnce; a function of a record names it in its errors (one
// of a group names the failing record itself: see ParseExampleBatch), and
// an Example made from records remembers them.
template <typename U, typename F, typename T>
StatusOr<U> CallMapFunction(F& fn, T&& x, uint64_t seed, uint64_t position) {
  using Input = std::decay_t<T>;
  constexpr bool kOne = std::is_same_v<Input, Record>;
  if constexpr (kOne || std::is_same_v<Input, std::vector<Record>>) {
    std::vector<RecordOrigin> origins = OriginsOf(x);
    StatusOr<U> y = CallMapFunctionOnce<U>(fn, std::forward<T>(x), seed, position);
    if (!y.ok()) return kOne ? Annotate(y.status(), DescribeOrigin(origins)) : y.status();
    if constexpr (std::is_same_v<U, Example>) {
      if (y->origins.empty()) y->origins = std::move(origins);
    }
    return y;
  } else {
    return CallMapFunctionOnce<U>(fn, std::forward<T>(x), seed, position);
  }
}

// What each kind of stage mixes into its input's seed.
enum class StageKind : uint64_t {
  kMap = 1,
  kFilter,
  kShuffle,
  kBatch,
  kGroup,
  kPrefetch,
  kTake,
  kSkip
};

// A seed for a stage of an unseeded pipeline.
inline uint64_t RandomSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace internal

template <typename T>
class Dataset {
 public:
  using Element = T;

  // A stage reading `source`; `seed` as with_seed (nullopt: unseeded).
  explicit Dataset(std::shared_ptr<internal::Source<T>> source,
                   std::optional<uint64_t> seed = std::nullopt)
      : source_(std::move(source)), seed_(seed) {}

  // The elements of `items`, in order.
  static Dataset FromVector(std::vector<T> items);

  // The same stage, seeded: the stages built on it derive their randomness
  // from `seed` (see the top of this file).
  Dataset with_seed(uint64_t seed) const { return Dataset(source_, seed); }
  // This stage's seed; nullopt when the pipeline is unseeded.
  const std::optional<uint64_t>& seed() const { return seed_; }

  // Next element, nullopt at the end, or the error that stopped the pipeline.
  StatusOr<std::optional<T>> Next() { return source_->Next(); }

  // fn(T) -> U or StatusOr<U>, applied to each element in order. With
  // options.workers() > 0, fn runs on that many threads (so it must be safe to
  // call concurrently) and results still come out in input order.
  // fn(T, at::Generator&) gets a generator for the element's random choices,
  // seeded from this stage's seed and the element's position.
  template <typename F>
  auto map(F fn, MapOptions options = MapOptions()) const;

  // Keeps the elements for which pred(const T&) -> bool (or StatusOr<bool>)
  // is true.
  template <typename P>
  Dataset filter(P pred) const;

  // Shuffles through a buffer of `buffer_size` elements, as tf.data does:
  // each output is drawn at random from the buffer and replaced by the next
  // input. A buffer as large as the data gives a uniform shuffle. The order
  // follows the pipeline's seed, or `seed` when given.
  Dataset shuffle(size_t buffer_size) const;
  Dataset shuffle(size_t buffer_size, uint64_t seed) const;

  // Groups `batch_size` consecutive elements with Collate<T>; the last batch
  // may be smaller unless `drop_remainder`.
  Dataset batch(size_t batch_size, bool drop_remainder = false) const;

  // Groups `n` consecutive elements into a vector, without collating. Raw
  // records grouped this way can be parsed a batch at a time with
  // ParseExampleBatch, much faster than parsing each and then batching.
  Dataset<std::vector<T>> group(size_t n, bool drop_remainder = false) const;

  // Computes up to `buffer_size` elements ahead on a background thread.
  Dataset prefetch(size_t buffer_size) const;

  // At most the first `n` elements.
  Dataset take(uint64_t n) const;

  // All but the first `n` elements (which are still computed, then dropped).
  Dataset skip(uint64_t n) const;

  // Range-for support; throws DatasetError on a failed pipeline.
  class iterator;
  iterator begin();
  iterator end() { return iterator(); }

  const std::shared_ptr<internal::Source<T>>& source() const { return source_; }

  // The seeds map() gives a stage built on this one: the seed its
  // function's generators derive from (with the element's position; random
  // when unseeded), and the stage's own. For map stages built outside this
  // class that must make map()'s random choices (a map over processes).
  uint64_t MapFunctionSeed() const { return SeedFor(internal::StageKind::kMap); }
  std::optional<uint64_t> MapStageSeed() const { return Derive(internal::StageKind::kMap); }

 private:
  // The seed of a stage of `kind` built on this one; a random one when
  // unseeded (a random seed is not passed on: later stages stay unseeded).
  std::optional<uint64_t> Derive(internal::StageKind kind) const {
    if (!seed_.has_value()) return std::nullopt;
    return SeedMix(*seed_, static_cast<uint64_t>(kind));
  }
  uint64_t SeedFor(internal::StageKind kind) const {
    std::optional<uint64_t> s = Derive(kind);
    return s.has_value() ? *s : internal::RandomSeed();
  }

  std::shared_ptr<internal::Source<T>> source_;
  std::optional<uint64_t> seed_;
};

// The records [start, end) of `file`, read lazily chunk by chunk.
Dataset<Record> ReadRecords(std::shared_ptr<const RecordFile> file, uint64_t start, uint64_t end);

// ParseExampleBatch over grouped records; an error names the failing
// record's file and index.
StatusOr<Features> ParseExampleBatch(const std::vector<Record>& records,
                                     const FeatureSpecMap& spec);

// ---------------------------------------------------------------------------
// Implementation.

namespace internal {

template <typename T>
class VectorSource final : public Source<T> {
 public:
  explicit VectorSource(std::vector<T> items) : items_(std::move(items)) {}
  StatusOr<std::optional<T>> Next() override {
    if (pos_ >= items_.size()) return std::optional<T>();
    return std::optional<T>(std::move(items_[pos_++]));
  }

 private:
  std::vector<T> items_;
  size_t pos_ = 0;
};

template <typename T, typename U, typename F>
class MapSource final : public Source<U> {
 public:
  MapSource(std::shared_ptr<Source<T>> input, F fn, uint64_t seed)
      : input_(std::move(input)), fn_(std::move(fn)), seed_(seed) {}
  StatusOr<std::optional<U>> Next() override {
    EDL_ASSIGN_OR_RETURN(std::optional<T> x, input_->Next());
    if (!x.has_value()) return std::optional<U>();
    EDL_ASSIGN_OR_RETURN(U y, (CallMapFunction<U>(fn_, std::move(*x), seed_, position_++)));
    return std::optional<U>(std::move(y));
  }

 private:
  std::shared_ptr<Source<T>> input_;
  F fn_;
  uint64_t seed_;
  uint64_t position_ = 0;
};

// Applies fn on worker threads; results leave in input order. Inputs are
// pulled from upstream one at a time and numbered; results wait in done_
// until their turn. At most max_queue_size elements are pulled ahead of the
// consumer. Threads start on the first Next() and stop in the destructor.
template <typename T, typename U, typename F>
class ParallelMapSource final : public Source<U> {
 public:
  ParallelMapSource(std::shared_ptr<Source<T>> input, F fn, MapOptions options, uint64_t seed)
      : input_(std::move(input)), fn_(std::move(fn)), options_(options), seed_(seed) {
    if (options_.max_queue_size() < 1) options_.max_queue_size(1);
  }

  ~ParallelMapSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  StatusOr<std::optional<U>> Next() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (threads_.empty()) {
      for (size_t i = 0; i < options_.workers(); ++i) {
        threads_.emplace_back([this] { Work(); });
      }
    }
    cv_.wait(lock, [this] {
      return done_.count(next_out_) > 0 || (input_exhausted_ && next_out_ >= next_in_);
    });
    auto it = done_.find(next_out_);
    if (it == done_.end()) return std::optional<U>();  // end of input
    StatusOr<std::optional<U>> result = std::move(it->second);
    done_.erase(it);
    ++next_out_;
    if (!result.ok() || !result->has_value()) input_exhausted_ = true;  // stop after an error
    lock.unlock();
    cv_.notify_all();
    return result;
  }

 private:
  void Work() {
    while (true) {
      // Upstream stages are single-consumer: one worker pulls at a time, and
      // sequence numbers follow pull order.
      std::unique_lock<std::mutex> pull(pull_mu_);
      uint64_t seq;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] {
          return stopping_ || input_exhausted_ || next_in_ - next_out_ < options_.max_queue_size();
        });
        if (stopping_ || input_exhausted_) return;
        seq = next_in_++;
      }
      StatusOr<std::optional<T>> input = input_->Next();
      if (!input.ok() || !input->has_value()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          input_exhausted_ = true;
          if (!input.ok()) {
            done_.emplace(seq, input.status());
          } else {
            --next_in_;  // the end is not an element
          }
        }
        cv_.notify_all();
        return;
      }
      pull.unlock();
      StatusOr<U> y = CallMapFunction<U>(fn_, std::move(**input), seed_, seq);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (y.ok()) {
          done_.emplace(seq, std::optional<U>(std::move(*y)));
        } else {
          done_.emplace(seq, y.status());
        }
      }
      cv_.notify_all();
    }
  }

  std::shared_ptr<Source<T>> input_;
  F fn_;
  MapOptions options_;
  uint64_t seed_;
  std::mutex pull_mu_;  // held while pulling from input_
  std::mutex mu_;       // guards everything below
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  std::map<uint64_t, StatusOr<std::optional<U>>> done_;
  uint64_t next_in_ = 0;   // sequence number of the next input pulled
  uint64_t next_out_ = 0;  // sequence number of the next result handed out
  bool input_exhausted_ = false;
  bool stopping_ = false;
};

template <typename T, typename P>
class FilterSource final : public Source<T> {
 public:
  FilterSource(std::shared_ptr<Source<T>> input, P pred)
      : input_(std::move(input)), pred_(std::move(pred)) {}
  StatusOr<std::optional<T>> Next() override {
    while (true) {
      EDL_ASSIGN_OR_RETURN(std::optional<T> x, input_->Next());
      if (!x.has_value()) return x;
      auto ref = [this](const T& v) { return pred_(v); };
      EDL_ASSIGN_OR_RETURN(bool keep, (CallUserFunction<bool>(ref, *x, position_++)));
      if (keep) return x;
    }
  }

 private:
  std::shared_ptr<Source<T>> input_;
  P pred_;
  uint64_t position_ = 0;
};

template <typename T>
class ShuffleSource final : public Source<T> {
 public:
  ShuffleSource(std::shared_ptr<Source<T>> input, size_t buffer_size, uint64_t seed)
      : input_(std::move(input)), buffer_size_(buffer_size < 1 ? 1 : buffer_size), rng_(seed) {}
  StatusOr<std::optional<T>> Next() override {
    while (!input_done_ && buffer_.size() < buffer_size_) {
      EDL_ASSIGN_OR_RETURN(std::optional<T> x, input_->Next());
      if (!x.has_value()) {
        input_done_ = true;
        break;
      }
      buffer_.push_back(std::move(*x));
    }
    if (buffer_.empty()) return std::optional<T>();
    std::uniform_int_distribution<size_t> pick(0, buffer_.size() - 1);
    size_t i = pick(rng_);
    std::optional<T> out(std::move(buffer_[i]));
    buffer_[i] = std::move(buffer_.back());
    buffer_.pop_back();
    return out;
  }

 private:
  std::shared_ptr<Source<T>> input_;
  size_t buffer_size_;
  std::mt19937_64 rng_;
  std::vector<T> buffer_;
  bool input_done_ = false;
};

template <typename T>
class GroupSource final : public Source<std::vector<T>> {
 public:
  GroupSource(std::shared_ptr<Source<T>> input, size_t n, bool drop_remainder)
      : input_(std::move(input)), n_(n < 1 ? 1 : n), drop_remainder_(drop_remainder) {}
  StatusOr<std::optional<std::vector<T>>> Next() override {
    std::vector<T> items;
    items.reserve(n_);
    while (items.size() < n_) {
      EDL_ASSIGN_OR_RETURN(std::optional<T> x, input_->Next());
      if (!x.has_value()) break;
      items.push_back(std::move(*x));
    }
    if (items.empty() || (drop_remainder_ && items.size() < n_)) {
      return std::optional<std::vector<T>>();
    }
    return std::optional<std::vector<T>>(std::move(items));
  }

 private:
  std::shared_ptr<Source<T>> input_;
  size_t n_;
  bool drop_remainder_;
};

template <typename T>
class BatchSource final : public Source<T> {
 public:
  BatchSource(std::shared_ptr<Source<T>> input, size_t batch_size, bool drop_remainder)
      : groups_(std::move(input), batch_size, drop_remainder) {}
  StatusOr<std::optional<T>> Next() override {
    EDL_ASSIGN_OR_RETURN(std::optional<std::vector<T>> items, groups_.Next());
    if (!items.has_value()) return std::optional<T>();
    StatusOr<T> batch = Collate<T>::Apply(*items);
    if (!batch.ok()) {
      return Annotate(batch.status(), "batch " + std::to_string(batches_));
    }
    ++batches_;
    return std::optional<T>(std::move(*batch));
  }

 private:
  GroupSource<T> groups_;
  uint64_t batches_ = 0;
};

template <typename T>
class SkipSource final : public Source<T> {
 public:
  SkipSource(std::shared_ptr<Source<T>> input, uint64_t n) : input_(std::move(input)), left_(n) {}
  StatusOr<std::optional<T>> Next() override {
    for (; left_ > 0; --left_) {
      EDL_ASSIGN_OR_RETURN(std::optional<T> x, input_->Next());
      if (!x.has_value()) return x;
    }
    return input_->Next();
  }

 private:
  std::shared_ptr<Source<T>> input_;
  uint64_t left_;
};

template <typename T>
class TakeSource final : public Source<T> {
 public:
  TakeSource(std::shared_ptr<Source<T>> input, uint64_t n) : input_(std::move(input)), left_(n) {}
  StatusOr<std::optional<T>> Next() override {
    if (left_ == 0) return std::optional<T>();
    --left_;
    return input_->Next();
  }

 private:
  std::shared_ptr<Source<T>> input_;
  uint64_t left_;
};

}  // namespace internal

template <typename T>
Dataset<T> Dataset<T>::FromVector(std::vector<T> items) {
  return Dataset<T>(std::make_shared<internal::VectorSource<T>>(std::move(items)));
}

template <typename T>
template <typename F>
auto Dataset<T>::map(F fn, MapOptions options) const {
  using U = internal::MapOutput<F, T>;
  using internal::StageKind;
  const uint64_t seed = SeedFor(StageKind::kMap);
  if (options.workers() == 0) {
    return Dataset<U>(std::make_shared<internal::MapSource<T, U, F>>(source_, std::move(fn), seed),
                      Derive(StageKind::kMap));
  }
  return Dataset<U>(
      std::make_shared<internal::ParallelMapSource<T, U, F>>(source_, std::move(fn), options, seed),
      Derive(StageKind::kMap));
}

template <typename T>
template <typename P>
Dataset<T> Dataset<T>::filter(P pred) const {
  return Dataset<T>(std::make_shared<internal::FilterSource<T, P>>(source_, std::move(pred)),
                    Derive(internal::StageKind::kFilter));
}

template <typename T>
Dataset<T> Dataset<T>::shuffle(size_t buffer_size) const {
  return shuffle(buffer_size, SeedFor(internal::StageKind::kShuffle));
}

template <typename T>
Dataset<T> Dataset<T>::shuffle(size_t buffer_size, uint64_t seed) const {
  return Dataset<T>(std::make_shared<internal::ShuffleSource<T>>(source_, buffer_size, seed),
                    Derive(internal::StageKind::kShuffle));
}

template <typename T>
Dataset<T> Dataset<T>::batch(size_t batch_size, bool drop_remainder) const {
  return Dataset<T>(std::make_shared<internal::BatchSource<T>>(source_, batch_size, drop_remainder),
                    Derive(internal::StageKind::kBatch));
}

template <typename T>
Dataset<std::vector<T>> Dataset<T>::group(size_t n, bool drop_remainder) const {
  return Dataset<std::vector<T>>(
      std::make_shared<internal::GroupSource<T>>(source_, n, drop_remainder),
      Derive(internal::StageKind::kGroup));
}

template <typename T>
Dataset<T> Dataset<T>::prefetch(size_t buffer_size) const {
  auto identity = [](T x) { return x; };
  return Dataset<T>(std::make_shared<internal::ParallelMapSource<T, T, decltype(identity)>>(
                        source_, identity, MapOptions().workers(1).max_queue_size(buffer_size), 0),
                    Derive(internal::StageKind::kPrefetch));
}

template <typename T>
Dataset<T> Dataset<T>::take(uint64_t n) const {
  return Dataset<T>(std::make_shared<internal::TakeSource<T>>(source_, n),
                    Derive(internal::StageKind::kTake));
}

template <typename T>
Dataset<T> Dataset<T>::skip(uint64_t n) const {
  return Dataset<T>(std::make_shared<internal::SkipSource<T>>(source_, n),
                    Derive(internal::StageKind::kSkip));
}

template <typename T>
class Dataset<T>::iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = T*;
  using reference = T&;

  iterator() = default;
  explicit iterator(Dataset* dataset) : dataset_(dataset) { Advance(); }
  T& operator*() { return *current_; }
  T* operator->() { return &*current_; }
  iterator& operator++() {
    Advance();
    return *this;
  }
  bool operator==(const iterator& other) const { return dataset_ == other.dataset_; }
  bool operator!=(const iterator& other) const { return !(*this == other); }

 private:
  void Advance() {
    StatusOr<std::optional<T>> next = dataset_->Next();
    if (!next.ok()) throw DatasetError(next.status());
    current_ = std::move(*next);
    if (!current_.has_value()) dataset_ = nullptr;
  }
  Dataset* dataset_ = nullptr;
  std::optional<T> current_;
};

template <typename T>
typename Dataset<T>::iterator Dataset<T>::begin() {
  return iterator(this);
}

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_DATASET_H_
