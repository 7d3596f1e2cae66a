#include "client/zoo_image.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "client/zoo_source.h"
#include "cluster/command.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/strings.h"
#include "zoo/zoo_builder.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;

// An image build may download its base image: allow it time.
constexpr auto kBuilderTimeout = std::chrono::minutes(30);

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs(path);
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::error_code ec;
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

Status RunBuilder(const std::vector<std::string>& argv) {
  EDL_ASSIGN_OR_RETURN(cluster::CommandResult r, cluster::RunCommand(argv, kBuilderTimeout));
  if (!r.ok()) {
    return absl::UnavailableError(StrCat(argv[0], " ", argv[1], " failed (exit code ", r.exit_code,
                                         "): ", r.err.empty() ? r.out : r.err));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::string> FindContainerBuilder(const std::string& wanted) {
  if (!wanted.empty() && wanted != "docker" && wanted != "podman" && wanted != "buildah") {
    return absl::InvalidArgumentError(
        StrCat("--builder=", wanted, ": expected docker, podman or buildah"));
  }
  for (const char* builder : {"docker", "podman", "buildah"}) {
    if ((wanted.empty() || wanted == builder) && OnPath(builder)) return std::string(builder);
  }
  return absl::FailedPreconditionError(
      wanted.empty() ? "no container builder on PATH: install docker, podman or buildah "
                       "(Debian: apt-get install podman)"
                     : StrCat(wanted, " is not on PATH"));
}

StatusOr<std::string> WriteZooImageContext(const ZooImageOptions& options) {
  if (options.base_image.empty()) {
    return absl::InvalidArgumentError(
        "--base_image is required: an image with elasticdl on its PATH (and its libraries)");
  }
  EDL_ASSIGN_OR_RETURN(ZooSource source, ResolveZooSource(options.model_zoo));
  const Environment env = ReadEnvironment();
  ZooBuildOptions build;
  build.zoo_dir = source.dir;
  build.cache_dir = env.cache_dir;
  EDL_ASSIGN_OR_RETURN(BuiltZoo zoo, BuildZoo(build));
  std::string dir = options.context_dir;
  if (dir.empty()) {
    dir = StrCat(env.temp_dir, "/elasticdl-zoo-image-",
                 zoo.identity.substr(zoo.identity.find(':') + 1, 16));
  }
  dir = AbsolutePath(dir);
  std::error_code ec;
  fs::remove_all(fs::path(dir) / "model_zoo", ec);
  fs::remove_all(fs::path(dir) / "zoo_library", ec);
  fs::remove_all(fs::path(dir) / "zoo_python", ec);
  EDL_RETURN_IF_ERROR(CreateDirectories(dir + "/zoo_library"));
  fs::copy(source.dir, fs::path(dir) / "model_zoo",
           fs::copy_options::recursive | fs::copy_options::skip_symlinks, ec);
  if (!ec && !zoo.library_path.empty()) {
    fs::copy_file(zoo.library_path,
                  fs::path(dir) / "zoo_library" / fs::path(zoo.library_path).filename(), ec);
  }
  if (!ec && !zoo.python_dir.empty()) {
    fs::copy(zoo.python_dir, fs::path(dir) / "zoo_python", fs::copy_options::recursive, ec);
  }
  if (ec) return absl::InternalError(StrCat("writing the build context ", dir, ": ", ec.message()));
  fs::remove_all(fs::path(dir) / "model_zoo" / ".git", ec);
  std::string dockerfile = fmt::format(
      "# The model zoo {zoo} on ElasticDL (elasticdl zoo build).\n"
      "FROM {base}\n"
      "LABEL org.elasticdl.zoo.identity=\"{identity}\"\n"
      "COPY model_zoo /model_zoo\n",
      fmt::arg("zoo", options.model_zoo), fmt::arg("base", options.base_image),
      fmt::arg("identity", zoo.identity));
  if (!zoo.library_path.empty()) {
    dockerfile += fmt::format(
        "# Where a job's spec names the compiled zoo.\n"
        "COPY zoo_library/{library} {path}\n",
        fmt::arg("library", fs::path(zoo.library_path).filename().string()),
        fmt::arg("path", zoo.library_path));
  }
  if (!zoo.python_dir.empty()) {
    dockerfile += fmt::format(
        "# Where a job's spec names the zoo's Python files.\n"
        "COPY zoo_python {path}\n",
        fmt::arg("path", zoo.python_dir));
  }
  EDL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/Dockerfile", dockerfile));
  return dir;
}

Status BuildZooImage(const ZooImageOptions& options) {
  if (options.image.empty()) return absl::InvalidArgumentError("--image is required");
  EDL_ASSIGN_OR_RETURN(std::string context, WriteZooImageContext(options));
  StatusOr<std::string> builder = FindContainerBuilder(options.builder);
  if (!builder.ok()) {
    return Status(builder.status().code(),
                  StrCat(builder.status().message(), "; the build context is ready in ", context,
                         " (`docker build -t ", options.image, " ", context,
                         "` on a machine that has a builder)"));
  }
  if (*builder == "buildah") return RunBuilder({"buildah", "bud", "-t", options.image, context});
  return RunBuilder({*builder, "build", "-t", options.image, context});
}

Status PushZooImage(const ZooImageOptions& options) {
  if (options.image.empty()) return absl::InvalidArgumentError("--image is required");
  EDL_ASSIGN_OR_RETURN(std::string builder, FindContainerBuilder(options.builder));
  return RunBuilder({builder, "push", options.image});
}

}  // namespace elasticdl::client
