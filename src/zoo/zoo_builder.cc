#include "zoo/zoo_builder.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/file.h"
#include "common/strings.h"
#include "zoo/zoo_library.h"
#include "zoo/zoo_sources.h"

extern char** environ;

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

Status ErrnoError(std::string_view what, const std::string& path) {
  return absl::InternalError(StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// A file descriptor closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` (creating it) and takes its exclusive flock, waiting for it;
// released when the descriptor closes.
StatusOr<Fd> LockFile(const std::string& path) {
  Fd lock(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) return ErrnoError("cannot open", path);
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoError("cannot lock", path);
  }
  return lock;
}

// Runs `argv` with stdout and stderr appended to `log_fd`, stdin from
// /dev/null. Returns the exit status (128 + signal if killed). Uses
// posix_spawn: safe in a process with other threads.
StatusOr<int> Run(const std::vector<std::string>& argv, int log_fd) {
  std::string line = "$";
  for (const std::string& arg : argv) line += " " + arg;
  line += "\n";
  if (::write(log_fd, line.data(), line.size()) < 0) return ErrnoError("cannot write", "log");

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  pid_t pid;
  int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    return absl::FailedPreconditionError(StrCat("cannot run ", argv[0], ": ", std::strerror(err)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoError("cannot wait for", argv[0]);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The package's files (ElasticDLFiles.txt: one path a line, relative to the
// prefix <package_dir>/../../..) stamped with their sizes and modification
// times, so that a rebuilt ElasticDL changes the stamp.
StatusOr<std::string> PackageStamp(const std::string& package_dir) {
  const std::string manifest = package_dir + "/ElasticDLFiles.txt";
  StatusOr<std::string> files = ReadFileToString(manifest);
  if (!files.ok() || !fs::exists(package_dir + "/ElasticDLConfig.cmake")) {
    return absl::FailedPreconditionError(
        StrCat("no ElasticDL CMake package at ", package_dir,
               " (ElasticDLConfig.cmake, ElasticDLFiles.txt); build the elasticdl_package "
               "target or install ElasticDL"));
  }
  const fs::path prefix = fs::path(package_dir) / "../../..";
  std::string stamp;
  auto add = [&stamp](const fs::path& p) {
    std::error_code ec;
    auto time = fs::last_write_time(p, ec).time_since_epoch().count();
    stamp += StrCat(p.string(), " ", fs::file_size(p, ec), " ", time, "\n");
  };
  std::istringstream lines(*files);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const fs::path path = fs::path(line).is_absolute() ? fs::path(line) : prefix / line;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::FailedPreconditionError(StrCat("the ElasticDL package at ", package_dir,
                                                  " is incomplete: ", path.string(),
                                                  " is missing"));
    }
    if (!fs::is_directory(path, ec)) {
      add(path);
      continue;
    }
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec)) add(it->path());
    }
  }
  return stamp;
}

// Quoted for CMake, whatever the path holds.
std::string CMakeQuote(std::string_view s) { return StrCat("[==[", s, "]==]"); }

// One unit of a zoo library: a file of the zoo, or the package's
// zoo_registry.cc (`file` empty). `object` is its place in the object cache,
// found there or put there once compiled.
struct Unit {
  std::string file;
  std::string object;
};

// The units of a library of `files` (sorted) and the registry, with their
// places in <cache>/zoo/objects: an object is keyed by its file's path and
// contents, every header of the zoo (any file may include any), the build
// type and the package's stamp.
std::vector<Unit> Units(const ZooSources& sources, const std::vector<std::string>& files,
                        const std::string& cache, const std::string& build_type,
                        const std::string& stamp) {
  std::string common = StrCat(build_type, "\n", Sha256().Update(stamp).HexDigest(), "\n");
  for (const std::string& header : sources.HeaderFiles()) {
    common += StrCat(header, " ", sources.digests.at(header), "\n");
  }
  auto object = [&](std::string_view what) {
    return StrCat(cache, "/zoo/objects/", Sha256().Update(common).Update(what).HexDigest(), ".o");
  };
  std::vector<Unit> units;
  units.reserve(files.size() + 1);
  for (const std::string& file : files) {
    units.push_back({file, object(StrCat("file ", file, " ", sources.digests.at(file)))});
  }
  // Last, so that a serial build reaches the zoo's own errors first.
  units.push_back({"", object("zoo_registry.cc")});
  return units;
}

std::string GenerateCMakeLists(const ZooSources& sources, const std::vector<Unit>& units,
                               const std::string& package_dir, bool precompile) {
  // The package's compiler, so that its precompiled header fits.
  std::string out =
      StrCat("# Generated by ElasticDL for the model zoo ", sources.dir, ".\n",
             "cmake_minimum_required(VERSION 3.16)\n", "include(",
             CMakeQuote(package_dir + "/ElasticDLCompiler.cmake"), " OPTIONAL)\n",
             "project(elasticdl_zoo LANGUAGES CXX)\n", "set(CMAKE_CXX_STANDARD 17)\n",
             "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n", "set(CMAKE_CXX_EXTENSIONS OFF)\n",
             "set(CMAKE_EXPORT_COMPILE_COMMANDS ON)\n",  // where each object is
             "find_package(ElasticDL CONFIG REQUIRED PATHS ", CMakeQuote(package_dir),
             " NO_DEFAULT_PATH)\n", "add_library(zoo MODULE)\n",
             "target_link_libraries(zoo PRIVATE ElasticDL::model)\n",
             "target_link_options(zoo PRIVATE -Wl,--no-undefined)\n",
             "set_target_properties(zoo PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}\n",
             // C++ also when every unit is a cached object
             "  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON LINKER_LANGUAGE CXX)\n");
  // LibTorch's headers precompiled by the package (the build tree's has
  // them), or by this build when it compiles more files than it has jobs.
  out +=
      "if(ELASTICDL_PRECOMPILED_HEADER)\n"
      "  message(STATUS \"LibTorch's precompiled header: ${ELASTICDL_PRECOMPILED_HEADER}\")\n"
      "  target_compile_options(zoo PRIVATE -pthread -Winvalid-pch\n"
      "                         ${ELASTICDL_PRECOMPILED_HEADER_OPTIONS})\n";
  if (precompile) out += "else()\n  target_precompile_headers(zoo PRIVATE <torch/torch.h>)\n";
  out += "endif()\n";
  for (const Unit& unit : units) {
    std::error_code ec;
    if (fs::exists(unit.object, ec)) {  // linked as it is
      out += StrCat("target_sources(zoo PRIVATE ", CMakeQuote(unit.object), ")\n");
    } else if (unit.file.empty()) {
      out += "target_sources(zoo PRIVATE ${ELASTICDL_ZOO_REGISTRY_SOURCE})\n";
    } else {
      const std::string path = CMakeQuote(sources.dir + "/" + unit.file);
      out += StrCat("target_sources(zoo PRIVATE ", path, ")\n", "set_source_files_properties(",
                    path, " PROPERTIES COMPILE_DEFINITIONS ",
                    CMakeQuote(StrCat("ELASTICDL_ZOO_MODULE=\"", SourceModule(unit.file), "\"")),
                    ")\n");
    }
  }
  return out;
}

// The argument of -o in a compile command as CMake writes it for a POSIX
// shell (words quoted with '"', '\\' escaping); empty if there is none.
std::string OutputOf(std::string_view command) {
  std::vector<std::string> words(1);
  bool quoted = false, in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == '\\' && i + 1 < command.size()) {
      words.back() += command[++i];
      in_word = true;
    } else if (c == '"') {
      quoted = !quoted;
      in_word = true;
    } else if (c == ' ' && !quoted) {
      if (in_word) words.emplace_back();
      in_word = false;
    } else {
      words.back() += c;
      in_word = true;
    }
  }
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "-o") return words[i + 1];
  }
  return "";
}

// Puts the objects a build in `build` compiled (compile_commands.json's
// commands say where each lies) into the cache, each by a rename: a reader sees none or
// the whole. Objects already there stay.
Status PublishObjects(const ZooSources& sources, const std::vector<Unit>& units,
                      const std::string& build) {
  EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(build + "/compile_commands.json"));
  const nlohmann::json commands = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!commands.is_array()) {
    return absl::InternalError(StrCat("cannot read ", build, "/compile_commands.json"));
  }
  for (const nlohmann::json& command : commands) {
    const std::string file = command.value("file", "");
    const std::string output = OutputOf(command.value("command", ""));
    const fs::path compiled = fs::path(command.value("directory", "")) / output;
    for (const Unit& unit : units) {
      const bool ours = unit.file.empty() ? HasSuffix(file, "/zoo_registry.cc")
                                          : file == sources.dir + "/" + unit.file;
      std::error_code ec;
      if (!ours || output.empty() || fs::exists(unit.object, ec) || !fs::exists(compiled, ec)) {
        continue;
      }
      EDL_RETURN_IF_ERROR(CreateDirectories(fs::path(unit.object).parent_path().string()));
      std::string temporary = unit.object + ".XXXXXX";
      const int fd = ::mkstemp(temporary.data());
      if (fd < 0) return ErrnoError("cannot create", temporary);
      ::close(fd);
      fs::copy_file(compiled, temporary, fs::copy_options::overwrite_existing, ec);
      // Synced before it takes its name: the cache trusts a name it finds.
      Status put =
          ec ? absl::InternalError(StrCat("copying: ", ec.message())) : SyncFile(temporary);
      if (put.ok() && ::rename(temporary.c_str(), unit.object.c_str()) != 0) {
        put = ErrnoToStatus(errno, "renaming");
      }
      if (!put.ok()) {
        fs::remove(temporary, ec);
        return Annotate(
            put, StrCat("cannot put ", compiled.string(), " into the cache as ", unit.object));
      }
      EDL_RETURN_IF_ERROR(SyncDirectory(fs::path(unit.object).parent_path().string()));
    }
  }
  return Status();
}

// The compiler's complaints in a build log: each line mentioning an error
// with the two lines after it (gcc's source line and caret), at most
// kMaxLines, with paths shortened to the zoo's.
std::string ErrorExcerpt(const std::string& log, const std::string& zoo_dir) {
  constexpr size_t kMaxLines = 40;
  constexpr size_t kContext = 2;
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto is_error = [](const std::string& l) {
    for (std::string_view tool : {"make", "gmake", "ninja", "FAILED:", "$ "}) {
      if (l.compare(0, tool.size(), tool) == 0) return false;
    }
    return l.find("error") != std::string::npos || l.find("CMake Error") != std::string::npos ||
           l.find("undefined reference") != std::string::npos;
  };
  std::string out;
  size_t taken = 0, next = 0;  // next: first line not yet taken
  for (size_t i = 0; i < lines.size() && taken < kMaxLines; ++i) {
    if (!is_error(lines[i])) continue;
    for (size_t j = std::max(i, next); j <= i + kContext && j < lines.size() && taken < kMaxLines;
         ++j, ++taken) {
      std::string l = lines[j];
      for (size_t at; (at = l.find(zoo_dir + "/")) != std::string::npos;) {
        l.erase(at, zoo_dir.size() + 1);
      }
      out += l + "\n";
      next = j + 1;
    }
  }
  return out;
}

// Builds a library of `units` in a fresh directory beside `entry_dir`,
// linking the cached objects and compiling the others (which then join the
// cache), and moves it into entry_dir. The caller holds the lock of
// entry_dir.
Status Build(const ZooSources& sources, const std::vector<Unit>& units,
             const ZooBuildOptions& options, const std::string& package_dir,
             const std::string& entry_dir, int* compiled) {
  EDL_RETURN_IF_ERROR(CreateDirectories(entry_dir));
  std::string work = entry_dir + ".build-XXXXXX";
  if (::mkdtemp(work.data()) == nullptr) return ErrnoError("cannot create", work);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};

  // Libraries of other files may need the same objects: each missing one is
  // compiled by one build at a time. Its lock is taken in the order of the
  // objects' paths (every build takes them so, holding only its own
  // library's lock besides), and it is looked for again once held.
  EDL_RETURN_IF_ERROR(CreateDirectories(fs::path(units.front().object).parent_path().string()));
  std::vector<std::string> missing;
  for (const Unit& unit : units) {
    std::error_code ec;
    if (!fs::exists(unit.object, ec)) missing.push_back(unit.object);
  }
  std::sort(missing.begin(), missing.end());
  std::vector<Fd> object_locks;
  for (const std::string& object : missing) {
    EDL_ASSIGN_OR_RETURN(Fd lock, LockFile(object + ".lock"));
    object_locks.push_back(std::move(lock));
  }

  const int jobs = options.jobs > 0
                       ? options.jobs
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  *compiled = 0;
  for (const Unit& unit : units) {
    std::error_code ec;
    if (!unit.file.empty() && !fs::exists(unit.object, ec)) ++*compiled;
  }
  const bool precompile = *compiled > jobs;
  {
    EDL_ASSIGN_OR_RETURN(auto file, WritableFile::Create(work + "/CMakeLists.txt"));
    EDL_RETURN_IF_ERROR(file->Append(GenerateCMakeLists(sources, units, package_dir, precompile)));
    EDL_RETURN_IF_ERROR(file->Close());
  }
  const std::string log_path = entry_dir + "/build.log";
  Fd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
  if (log.get() < 0) return ErrnoError("cannot create", log_path);

  const std::string build = work + "/build";
  int exit_code = 0;
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"cmake", "-S", work, "-B", build,
                                 "-DCMAKE_BUILD_TYPE=" + options.build_type},
        std::vector<std::string>{"cmake", "--build", build, "--parallel", std::to_string(jobs)}}) {
    EDL_ASSIGN_OR_RETURN(exit_code, Run(command, log.get()));
    if (exit_code != 0) break;
  }
  // What compiled is kept even when another file or the link failed (the
  // compiler leaves no object of a file it failed on); not after a signal.
  if (exit_code < 128 && fs::exists(build + "/compile_commands.json")) {
    EDL_RETURN_IF_ERROR(PublishObjects(sources, units, build));
  }
  if (exit_code != 0) {
    EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(log_path));
    return absl::InvalidArgumentError(StrCat("model zoo ", sources.dir, " failed to compile:\n",
                                             ErrorExcerpt(text, sources.dir),
                                             "(full log: ", log_path, ")"));
  }
  // rename() is atomic: a reader sees no library or the whole one; synced
  // first, so that after a crash the name holds the whole one too.
  const std::string built = build + "/libzoo.so", library = entry_dir + "/libzoo.so";
  EDL_RETURN_IF_ERROR(SyncFile(built));
  if (::rename(built.c_str(), library.c_str()) != 0) return ErrnoError("cannot publish", library);
  return SyncDirectory(entry_dir);
}

// The compiled files a library for `modules` holds: every one when
// `modules` is empty or names them all; else those of `modules` (none when
// they are Python files or no file of the zoo: looking their entries up
// says so).
std::vector<std::string> SelectFiles(const ZooSources& sources,
                                     const std::vector<std::string>& modules) {
  std::vector<std::string> every_file = sources.CompiledFiles();
  if (modules.empty()) return every_file;
  std::set<std::string> chosen;
  for (const std::string& module : modules) {
    const std::string file = ModuleFile(module);
    if (std::binary_search(every_file.begin(), every_file.end(), file)) chosen.insert(file);
  }
  if (chosen.size() == every_file.size()) return every_file;
  return {chosen.begin(), chosen.end()};
}

// Makes `product` (a file or directory under entry_dir) with `make` unless
// it exists. One maker per entry at a time: the others wait for its lock,
// then find it made. Returns whether this call made it.
template <typename Make>
StatusOr<bool> MakeOnce(const std::string& entry_dir, const std::string& product, Make make) {
  if (fs::exists(product)) return false;
  EDL_RETURN_IF_ERROR(CreateDirectories(fs::path(entry_dir).parent_path().string()));
  EDL_ASSIGN_OR_RETURN(Fd lock, LockFile(entry_dir + ".lock"));
  if (fs::exists(product)) return false;
  EDL_RETURN_IF_ERROR(make());
  return true;
}

// Copies the zoo's .py files into a fresh directory beside `python_dir`
// and renames it into place. The caller holds the lock of entry_dir.
Status CopyPythonFiles(const ZooSources& sources, const std::string& entry_dir,
                       const std::string& python_dir) {
  EDL_RETURN_IF_ERROR(CreateDirectories(entry_dir));
  std::string work = python_dir + ".copy-XXXXXX";
  if (::mkdtemp(work.data()) == nullptr) return ErrnoError("cannot create", work);
  for (const std::string& file : sources.PythonFiles()) {
    const fs::path to = fs::path(work) / file;
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    if (!ec) fs::copy_file(fs::path(sources.dir) / file, to, ec);
    if (ec) {
      fs::remove_all(work, ec);
      return absl::InternalError(StrCat("copying ", file, " of model zoo ", sources.dir,
                                        " into the cache: ", ec.message()));
    }
  }
  Status published = SyncTree(work);
  if (published.ok() && ::rename(work.c_str(), python_dir.c_str()) != 0) {
    published = ErrnoError("cannot publish", python_dir);
  }
  if (!published.ok()) {
    std::error_code ec;
    fs::remove_all(work, ec);
    return published;
  }
  return SyncDirectory(fs::path(python_dir).parent_path().string());
}

}  // namespace

std::string DefaultPackageDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "../lib/cmake/ElasticDL").lexically_normal().string();
}

StatusOr<BuiltZoo> BuildZoo(const ZooBuildOptions& options) {
  EDL_ASSIGN_OR_RETURN(ZooSources sources, ScanZooSources(options.zoo_dir));
  if (options.cache_dir.empty())
    return absl::InvalidArgumentError("building a zoo needs a cache directory");
  const std::string& cache = options.cache_dir;
  // Libraries found in the cache are loaded and objects found there linked:
  // the cache and each directory on the way to them must be this user's
  // alone, or another user could plant code that runs as this one.
  EDL_RETURN_IF_ERROR(UsePrivateDirectories(cache));
  BuiltZoo zoo;
  zoo.identity = sources.identity;
  zoo.sources = sources.files;
  zoo.cached = true;
  const std::vector<std::string> every_file = sources.CompiledFiles();
  std::vector<std::string> files = SelectFiles(sources, options.modules);
  if (!files.empty()) {
    const std::string package_dir =
        options.package_dir.empty() ? DefaultPackageDir() : options.package_dir;
    EDL_ASSIGN_OR_RETURN(std::string stamp, PackageStamp(package_dir));
    // A library per set of objects; a set that does not link by itself
    // leaves a mark, and every file is built instead, then and from then on.
    bool made = false;
    Status built;
    for (bool retry = true; retry;) {
      retry = false;
      std::vector<Unit> units = Units(sources, files, cache, options.build_type, stamp);
      Sha256 key;
      for (const Unit& unit : units) key.Update(StrCat(unit.file, " ", unit.object, "\n"));
      const std::string entry = StrCat("zoo/", key.HexDigest());
      const std::string entry_dir = StrCat(cache, "/", entry);
      EDL_RETURN_IF_ERROR(UsePrivateDirectories(cache, "zoo/objects"));
      EDL_RETURN_IF_ERROR(UsePrivateDirectories(cache, entry));
      const std::string unlinkable = entry_dir + "/needs-every-file";
      if (files.size() < every_file.size() && fs::exists(unlinkable)) {
        files = every_file;
        retry = true;
        continue;
      }
      zoo.library_path = entry_dir + "/libzoo.so";
      int compiled = 0;
      StatusOr<bool> result = MakeOnce(entry_dir, zoo.library_path, [&] {
        return Build(sources, units, options, package_dir, entry_dir, &compiled);
      });
      zoo.objects_compiled += compiled;
      if (result.ok()) {
        made = *result;
        built = Status();
      } else {
        built = result.status();
        if (files.size() < every_file.size() &&
            built.message().find("undefined reference") != std::string_view::npos) {
          EDL_RETURN_IF_ERROR(WriteFileAtomically(unlinkable, std::string(built.message())));
          files = every_file;
          retry = true;
        }
      }
    }
    EDL_RETURN_IF_ERROR(built);
    zoo.cached = !made;
  }
  zoo.compiled = files;
  std::set_difference(every_file.begin(), every_file.end(), files.begin(), files.end(),
                      std::back_inserter(zoo.left_out));
  if (!sources.PythonFiles().empty()) {
    const std::string hex = sources.python_identity.substr(sources.python_identity.find(':') + 1);
    const std::string entry_dir = StrCat(cache, "/python/", hex);
    EDL_RETURN_IF_ERROR(UsePrivateDirectories(cache, StrCat("python/", hex)));
    zoo.python_dir = entry_dir + "/zoo";
    EDL_ASSIGN_OR_RETURN(bool made, MakeOnce(entry_dir, zoo.python_dir, [&] {
                           return CopyPythonFiles(sources, entry_dir, zoo.python_dir);
                         }));
    zoo.cached = zoo.cached && !made;
  }
  return zoo;
}

}  // namespace elasticdl
