// What the training benchmarks share: the seed CNN's zoo entries compiled
// into the benchmark (model_zoo/mnist/mnist_functional_api.cc), and record
// files cut into tasks as the master cuts them.
#ifndef ELASTICDL_BENCH_MNIST_TASKS_H_
#define ELASTICDL_BENCH_MNIST_TASKS_H_

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "elasticdl/data/record_file.h"
#include "elasticdl/zoo/registry.h"
#include "master/data_source.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_program.h"

namespace elasticdl::zoo_internal {
ZooRegistry& LocalRegistry();  // share/zoo_registry.cc, linked in
}

namespace elasticdl::bench {

[[noreturn]] inline void Die(const Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  std::exit(1);
}

template <typename T>
T OrDie(StatusOr<T> v) {
  if (!v.ok()) Die(v.status());
  return *std::move(v);
}

// The seed CNN's entries, as a worker resolves them.
inline ZooProgram MakeProgram(const std::string& dataset_fn = "dataset_fn",
                              const std::string& optimizer = "optimizer") {
  auto library = OrDie(ZooLibrary::FromRegistry(&zoo_internal::LocalRegistry(), "bench"));
  ZooProgramNames names;
  names.model_def = "mnist.mnist_functional_api.custom_model";
  names.dataset_fn = dataset_fn;
  names.optimizer = optimizer;
  return OrDie(ZooProgram::Resolve(std::move(library), names, ""));
}

// A task as the master hands it out: records [start, end) of one file.
struct Task {
  std::shared_ptr<const RecordFile> file;
  uint64_t start, end;
};

// The record files of `dir` as the master lists them, up to `records`
// records in all (-1: all), cut into tasks of at most `per_task` records as
// the master cuts them (master::SplitIntoTasks): `sizes` kEven for the
// training data of a job whose workers step together (synchronous or
// collective), kFullFirst otherwise.
inline std::vector<Task> MakeTasks(const std::string& dir, uint64_t per_task, int64_t records = -1,
                                   master::TaskSizes sizes = master::TaskSizes::kFullFirst) {
  const std::vector<std::string> paths = OrDie(master::ExpandDataPath(dir));
  uint64_t left = records < 0 ? UINT64_MAX : static_cast<uint64_t>(records);
  std::vector<master::Shard> shards;
  std::map<std::string, std::shared_ptr<const RecordFile>> files;
  for (const std::string& p : paths) {
    if (left == 0) break;
    std::shared_ptr<const RecordFile> file = OrDie(RecordFile::Open(p));
    const uint64_t n = std::min<uint64_t>(file->num_records(), left);
    left -= n;
    shards.push_back({p, static_cast<int64_t>(n)});
    files.emplace(p, std::move(file));
  }
  std::vector<Task> tasks;
  for (const master::Range& r :
       master::SplitIntoTasks(shards, static_cast<int64_t>(per_task), sizes)) {
    tasks.push_back(
        {files.at(r.file), static_cast<uint64_t>(r.start), static_cast<uint64_t>(r.end)});
  }
  return tasks;
}

}  // namespace elasticdl::bench

#endif  // ELASTICDL_BENCH_MNIST_TASKS_H_
