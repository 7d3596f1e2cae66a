// Deriving seeds: a job has one seed (`--seed`); every random choice in it
// (initial parameters, the order of tasks, a dataset_fn's shuffles, dropout
// masks) draws from a seed derived from it and from what the choice is about
// (the epoch, the task, the minibatch), so that it is the same on every
// attempt and every run with the same seed.
//
//   uint64_t s = SeedMix(SeedMix(job_seed, epoch), task_id);
//
// SeedMix is SplitMix64's finalizer over both inputs: nearby inputs give
// unrelated outputs, and SeedMix(a, b) != SeedMix(b, a) in general. The
// same finalizer hashes ids (embedding rows, hashed features) elsewhere.
#ifndef ELASTICDL_SEED_H_
#define ELASTICDL_SEED_H_

#include <cstdint>
#include <initializer_list>

namespace elasticdl {

// SplitMix64's output function (Steele, Lea and Flood 2014): a bijection of
// 64-bit words that sends nearby inputs to unrelated outputs.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One step of SplitMix64 from state `x`: its output for the state x + the
// golden-ratio increment. A pure function of x, so a generator can be a
// single word (`state = SplitMix64(state)`) or a hash of an id.
inline uint64_t SplitMix64(uint64_t x) { return Mix64(x + 0x9e3779b97f4a7c15ULL); }

inline uint64_t SeedMix(uint64_t seed, uint64_t value) {
  return Mix64(seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

// SeedMix over several values in order.
inline uint64_t SeedMix(uint64_t seed, std::initializer_list<uint64_t> values) {
  for (uint64_t v : values) seed = SeedMix(seed, v);
  return seed;
}

// The seeds a job derives from its seed `job`, one per kind of choice (a
// loop in one process can make the same choices as a job).
namespace job_seeds {

// The initial model: LibTorch's generator before the model is built.
inline uint64_t InitialModel(uint64_t job) { return SeedMix(job, 1); }
// The order of the tasks in each epoch (the master's shuffle).
inline uint64_t TaskOrder(uint64_t job) { return SeedMix(job, 101); }
// A task's pipeline: Dataset::with_seed of its records.
inline uint64_t Pipeline(uint64_t job, int64_t epoch, int64_t task) {
  return SeedMix(job, {2, static_cast<uint64_t>(epoch), static_cast<uint64_t>(task)});
}
// LibTorch's generator before the pipeline yields minibatch `minibatch`.
inline uint64_t PipelinePull(uint64_t job, int64_t task, int64_t minibatch) {
  return SeedMix(job, {3, static_cast<uint64_t>(task), static_cast<uint64_t>(minibatch)});
}
// LibTorch's generator before the forward of minibatch `minibatch` (dropout).
inline uint64_t Minibatch(uint64_t job, int64_t task, int64_t minibatch) {
  return SeedMix(job, {4, static_cast<uint64_t>(task), static_cast<uint64_t>(minibatch)});
}

}  // namespace job_seeds

}  // namespace elasticdl

#endif  // ELASTICDL_SEED_H_
