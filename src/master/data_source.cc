#include "master/data_source.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "common/strings.h"
#include "elasticdl/data/record_file.h"

namespace elasticdl::master {
namespace fs = std::filesystem;

StatusOr<std::vector<std::string>> ExpandDataPath(const std::string& spec) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    for (const auto& entry : fs::directory_iterator(spec, ec)) {
      std::string name = entry.path().filename().string();
      if (!entry.is_regular_file() || name.empty() || name[0] == '.' ||
          HasSuffix(name, ".partial")) {
        continue;
      }
      files.push_back(entry.path().string());
    }
    if (ec) return absl::NotFoundError(StrCat(spec, ": ", ec.message()));
    if (files.empty()) return absl::NotFoundError(StrCat(spec, ": directory has no record files"));
  } else if (spec.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
      if (fs::is_regular_file(g.gl_pathv[i], ec)) files.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (files.empty()) return absl::NotFoundError(StrCat(spec, ": no file matches"));
  } else {
    if (!fs::is_regular_file(spec, ec)) {
      if (fs::exists(spec, ec)) {
        return absl::InvalidArgumentError(StrCat(
            spec, ": not a record file, nor a directory of them (a device, a pipe or a socket)"));
      }
      return absl::NotFoundError(StrCat(spec, ": no such file or directory"));
    }
    files.push_back(spec);
  }
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<std::vector<Shard>> OpenShards(const std::vector<std::string>& files,
                                        const std::string& flag) {
  std::vector<Shard> shards;
  for (const std::string& f : files) {
    auto file = RecordFile::Open(f);
    if (!file.ok()) {
      return Status(file.status().code(), StrCat(flag, ": ", file.status().message()));
    }
    shards.push_back({f, static_cast<int64_t>((*file)->num_records())});
  }
  return shards;
}

std::vector<Range> SplitIntoTasks(const std::vector<Shard>& shards, int64_t records_per_task,
                                  TaskSizes sizes) {
  std::vector<Range> ranges;
  for (const Shard& s : shards) {
    const int64_t n = s.num_records;
    const int64_t tasks = (n + records_per_task - 1) / records_per_task;
    for (int64_t i = 0, start = 0; i < tasks; ++i) {
      // Evenly: the first `n % tasks` tasks take one record more.
      const int64_t size = sizes == TaskSizes::kEven ? n / tasks + (i < n % tasks ? 1 : 0)
                                                     : std::min(records_per_task, n - start);
      ranges.push_back({s.file, start, start + size});
      start += size;
    }
  }
  return ranges;
}

}  // namespace elasticdl::master
