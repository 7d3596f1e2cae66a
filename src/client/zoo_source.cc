#include "client/zoo_source.h"

#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "common/environment.h"
#include "common/file.h"
#include "common/strings.h"
#include "zoo/git_zoo.h"
#include "zoo/zoo_builder.h"
#include "zoo/zoo_sources.h"

namespace elasticdl::client {
namespace {

// The identity of the sources in `dir`, which must be `want`.
Status CheckIdentity(const std::string& dir, const std::string& want, const std::string& what) {
  StatusOr<ZooSources> sources = ScanZooSources(dir);
  if (!sources.ok()) return Annotate(sources.status(), what);
  if (!want.empty() && sources->identity != want) {
    return absl::InvalidArgumentError(StrCat(what, " holds other sources (", sources->identity,
                                             ") than the model was trained with (", want, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<ZooSource> ResolveZooSource(const std::string& model_zoo) {
  ZooSource source;
  if (!IsZooUrl(model_zoo)) {
    source.dir = model_zoo;
    source.model_zoo = AbsolutePath(model_zoo);
    return source;
  }
  const std::string flag = StrCat("--model_zoo=", model_zoo);
  StatusOr<GitZooUrl> url = ParseGitZooUrl(model_zoo);
  if (!url.ok()) return Annotate(url.status(), flag);
  StatusOr<FetchedGitZoo> fetched = FetchGitZoo(*url, ReadEnvironment().cache_dir);
  if (!fetched.ok()) return Annotate(fetched.status(), flag);
  fmt::print(stderr, "model zoo {} at {}{}\n", url->url, fetched->commit,
             fetched->cached ? " (cached)" : "");
  source.dir = fetched->dir;
  source.model_zoo = model_zoo;
  source.commit = fetched->commit;
  return source;
}

StatusOr<std::string> TrainedZooSources(const proto::TrainedModel& record,
                                        const std::string& copy) {
  const std::string at = StrCat(record.model_zoo(), " at ", record.zoo_commit());
  StatusOr<GitZooUrl> url = ParseGitZooUrl(record.model_zoo());
  Status failed = url.status();
  if (url.ok()) {
    url->ref = record.zoo_commit();
    StatusOr<FetchedGitZoo> fetched = FetchGitZoo(*url, ReadEnvironment().cache_dir);
    if (fetched.ok()) {
      fmt::print(stderr, "model zoo {} at {}{}\n", url->url, fetched->commit,
                 fetched->cached ? " (cached)" : "");
      EDL_RETURN_IF_ERROR(CheckIdentity(fetched->dir, record.zoo_identity(), "model zoo " + at));
      return fetched->dir;
    }
    failed = fetched.status();
  }
  if (copy.empty()) {
    return Annotate(failed, StrCat("the trained model's zoo ", at,
                                   " cannot be fetched and "
                                   "the trained model holds no copy of it"));
  }
  fmt::print(stderr, "note: model zoo {} cannot be fetched ({}); using the copy in {}\n", at,
             std::string(failed.message()), copy);
  EDL_RETURN_IF_ERROR(CheckIdentity(copy, record.zoo_identity(), copy));
  return copy;
}

void RecordZooSource(const ZooSource& source, proto::ModelSpec* model) {
  model->set_model_zoo(source.model_zoo);
  model->set_zoo_commit(source.commit);
}

void RecordZooSource(const ZooSource& source, proto::TrainedModel* record) {
  record->set_model_zoo(source.model_zoo);
  record->set_zoo_commit(source.commit);
}

Status SnapshotZoo(const std::string& zoo, const std::string& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(zoo, ec)) {
    return absl::InvalidArgumentError(StrCat("--model_zoo=", zoo, ": not a directory"));
  }
  fs::remove_all(to, ec);
  for (auto it = fs::recursive_directory_iterator(zoo, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path& from = it->path();
    const std::string ext = from.extension().string();
    if (ext != ".cc" && ext != ".h" && ext != ".py" && ext != ".md") continue;
    std::error_code status_ec;
    if (!it->is_regular_file(status_ec)) {
      if (status_ec && status_ec != std::errc::no_such_file_or_directory &&
          status_ec != std::errc::not_a_directory) {
        return absl::InvalidArgumentError(StrCat("--model_zoo=", zoo, ": ", from.string(),
                                                 " cannot be read: ", status_ec.message()));
      }
      continue;
    }
    // The iterator's paths are `zoo` and names read from its directories:
    // lexically below `zoo`, never "..".
    const fs::path target = fs::path(to) / from.lexically_relative(zoo);
    fs::create_directories(target.parent_path(), ec);
    if (!ec) fs::copy_file(from, target, fs::copy_options::overwrite_existing, ec);
    if (ec) break;
  }
  if (ec) return absl::InternalError(StrCat("copying the model zoo ", zoo, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace elasticdl::client
