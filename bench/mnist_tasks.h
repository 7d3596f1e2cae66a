// What the training benchmarks share: the seed CNN's zoo entries compiled
// into the benchmark (model_zoo/mnist/mnist_functional_api.cc), and record
// files cut into tasks as the master cuts them.
#ifndef ELASTICDL_BENCH_MNIST_TASKS_H_
#define ELASTICDL_BENCH_MNIST_TASKS_H_

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/strings.h"
#include "elasticdl/data/record_file.h"
#include "elasticdl/zoo/registry.h"
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

// The record files of `dir` (sorted, as the master lists them), cut into
// tasks of `per_task` records, up to `records` records in all (-1: all).
inline std::vector<Task> MakeTasks(const std::string& dir, uint64_t per_task,
                                   int64_t records = -1) {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) Die(absl::NotFoundError(StrCat("no record files in ", dir)));
  const uint64_t limit = records < 0 ? UINT64_MAX : static_cast<uint64_t>(records);
  std::vector<Task> tasks;
  uint64_t total = 0;
  for (const std::string& p : paths) {
    std::shared_ptr<const RecordFile> file = OrDie(RecordFile::Open(p));
    for (uint64_t s = 0; s < file->num_records() && total < limit; s += per_task) {
      uint64_t e = std::min({s + per_task, file->num_records(), s + limit - total});
      tasks.push_back({file, s, e});
      total += e - s;
    }
  }
  return tasks;
}

}  // namespace elasticdl::bench

#endif  // ELASTICDL_BENCH_MNIST_TASKS_H_
