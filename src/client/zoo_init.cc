#include "client/zoo_init.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include "common/file.h"
#include "common/strings.h"

namespace elasticdl::client {
namespace {

namespace fs = std::filesystem;

// Where a template's text names the new zoo.
constexpr std::string_view kZooPlaceholder = "{{zoo}}";

// The tabular template's data set: rows and seeds of each split.
constexpr int64_t kTabularTrainRows = 600;
constexpr int64_t kTabularTestRows = 200;
constexpr uint32_t kTabularTrainSeed = 1;
constexpr uint32_t kTabularTestSeed = 2;

const ZooTemplate* FindTemplate(std::string_view name) {
  for (const ZooTemplate& t : ZooTemplates()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// `text` with every `from` replaced by `to`.
std::string ReplaceAll(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// `path` as a shell word: as it is when it holds only characters no shell
// treats specially, else in single quotes.
std::string ShellWord(const std::string& path) {
  const bool plain = !path.empty() && std::all_of(path.begin(), path.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./+-:@%").find(c) != std::string_view::npos;
  });
  if (plain) return path;
  return StrCat("'", ReplaceAll(path, "'", "'\\''"), "'");
}

// "my_zoo/" and "./my_zoo" as "my_zoo".
std::string NormalizeDir(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p.string();
}

// A zoo's files to write: relative path -> contents.
using ZooFiles = std::map<std::string, std::string>;

// The files of the template in `source`, read before anything is written.
StatusOr<ZooFiles> ReadTemplate(const std::string& source) {
  ZooFiles files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(source, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string relative = it->path().lexically_relative(source).string();
    EDL_ASSIGN_OR_RETURN(files[relative], ReadFileToString(it->path().string()));
  }
  if (ec) return ErrnoToStatus(ec.value(), StrCat(source, ": cannot list the template's files"));
  return files;
}

// What `dir` is now: OK when it may become the zoo (absent, or an empty
// directory); sets `*exists`.
Status CheckTarget(const std::string& dir, bool* exists) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  *exists = fs::exists(status);
  if (ec && status.type() != fs::file_type::not_found) {
    return ErrnoToStatus(ec.value(), StrCat(dir, ": cannot look at DIR"));
  }
  if (!*exists) return absl::OkStatus();
  if (!fs::is_directory(status)) {
    return absl::AlreadyExistsError(StrCat(dir, ": exists and is not a directory"));
  }
  const bool empty = fs::is_empty(dir, ec);
  if (ec) return ErrnoToStatus(ec.value(), StrCat(dir, ": cannot list DIR"));
  if (!empty) {
    return absl::AlreadyExistsError(
        StrCat(dir,
               ": exists and is not empty (zoo init writes a new zoo into a new or an "
               "empty directory)"));
  }
  return absl::OkStatus();
}

// Creates `dir` and its missing parents; `*created` is set to the outermost
// directory this call made (empty when `dir` was there). Only a path whose
// lookup says "not found" counts as missing.
Status MakeDirectories(const std::string& dir, fs::path* created) {
  std::vector<fs::path> missing;  // innermost first
  for (fs::path p = fs::absolute(dir).lexically_normal(); p.has_relative_path();
       p = p.parent_path()) {
    if (!p.has_filename()) continue;  // "a/b/" is "a/b"
    std::error_code ec;
    if (fs::symlink_status(p, ec).type() != fs::file_type::not_found) break;
    missing.push_back(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) != 0) {
      return ErrnoToStatus(errno, StrCat(dir, ": cannot create directory ", it->string()));
    }
    if (created->empty()) *created = *it;
  }
  return absl::OkStatus();
}

Status WriteFile(const std::string& path, std::string_view contents) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    return ErrnoToStatus(
        ec.value(), StrCat(fs::path(path).parent_path().string(), ": cannot create directory"));
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, WritableFile::Create(path));
  EDL_RETURN_IF_ERROR(file->Append(contents));
  return file->Close();
}

}  // namespace

const std::vector<ZooTemplate>& ZooTemplates() {
  static const auto* const templates = new std::vector<ZooTemplate>{
      {"mnist", "a small CNN on Fashion-MNIST (elasticdl data mnist)",
       "elasticdl data mnist --output={zoo}/data --limit=2000", "mnist/model.cc"},
      {"pytorch", "the same CNN as a PyTorch model file (mnist/model.py)",
       "elasticdl data mnist --output={zoo}/data --limit=2000", "mnist/model.py"},
      {"tabular", "an MLP on CSV rows, with a generated data set (data/train.csv, data/test.csv)",
       "elasticdl data convert {zoo}/data/train.csv {zoo}/data/train.recordio "
       "--csv_types=label:int64",
       "tabular/model.cc"},
      {"trial",
       "a trial (build_model, make_data_loaders, callbacks) on Fashion-MNIST, and an "
       "experiment file that searches its hyperparameters",
       "elasticdl data mnist --output={zoo}/data --limit=2000", "trial/model.cc"},
  };
  return *templates;
}

std::string ZooTemplateNames() {
  std::string names;
  for (const ZooTemplate& t : ZooTemplates()) names += StrCat(names.empty() ? "" : ", ", t.name);
  return names;
}

StatusOr<ZooInitResult> InitZoo(const ZooInitOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("DIR: the zoo's directory is empty");
  const ZooTemplate* zoo_template = FindTemplate(options.template_name);
  if (zoo_template == nullptr) {
    return absl::InvalidArgumentError(StrCat("--template=", options.template_name,
                                             ": no such template (the templates are ",
                                             ZooTemplateNames(), ")"));
  }
  const std::string templates_dir =
      options.templates_dir.empty() ? InstalledShareDir("zoo_templates") : options.templates_dir;
  const std::string source = StrCat(templates_dir, "/", zoo_template->name);
  std::error_code ec;
  if (!fs::is_directory(source, ec)) {
    return absl::NotFoundError(StrCat(source, ": the template '", zoo_template->name,
                                      "' is not there (installed with elasticdl under "
                                      "share/elasticdl/zoo_templates)"));
  }

  ZooInitResult result;
  result.dir = NormalizeDir(options.dir);
  const std::string zoo_word = ShellWord(result.dir);
  EDL_ASSIGN_OR_RETURN(ZooFiles files, ReadTemplate(source));
  if (files.empty()) return absl::NotFoundError(StrCat(source, ": the template has no files"));
  for (auto& [path, contents] : files) contents = ReplaceAll(contents, kZooPlaceholder, zoo_word);
  if (zoo_template->name == "tabular") {
    files["data/train.csv"] = SyntheticTabularCsv(kTabularTrainRows, kTabularTrainSeed);
    files["data/test.csv"] = SyntheticTabularCsv(kTabularTestRows, kTabularTestSeed);
  }

  bool exists = false;
  EDL_RETURN_IF_ERROR(CheckTarget(result.dir, &exists));
  // Takes back what was written: the directories made, or the files put
  // into the empty directory that was there.
  fs::path created;
  auto undo = [&] {
    std::error_code ignored;
    if (!created.empty()) {
      fs::remove_all(created, ignored);
    } else if (exists) {
      for (const auto& [path, contents] : files) {
        fs::remove_all(fs::path(result.dir) / *fs::path(path).begin(), ignored);
      }
    }
  };
  if (!exists) {
    if (Status s = MakeDirectories(result.dir, &created); !s.ok()) {
      undo();
      return s;
    }
  }
  for (const auto& [path, contents] : files) {
    if (Status s = WriteFile(StrCat(result.dir, "/", path), contents); !s.ok()) {
      undo();
      return s;
    }
    result.files.push_back(path);
  }
  result.next_command = ReplaceAll(std::string(zoo_template->next_command), "{zoo}", zoo_word);
  return result;
}

std::string SyntheticTabularCsv(int64_t rows, uint32_t seed) {
  // Each class's centre.
  static constexpr double kCentres[3][4] = {
      {-1.5, 1.0, 0.0, 0.5}, {1.5, 0.5, -1.0, -0.5}, {0.0, -1.5, 1.0, -0.5}};
  // The standard fixes mt19937's sequence (unlike its distributions'), so
  // the uniforms and normals below are derived by hand.
  std::mt19937 engine(seed);
  auto uniform = [&engine] {  // in (0, 1)
    return (static_cast<double>(engine()) + 0.5) / 4294967296.0;
  };
  auto normal = [&uniform] {  // Box-Muller
    const double radius = std::sqrt(-2.0 * std::log(uniform()));
    return radius * std::cos(2.0 * M_PI * uniform());
  };
  std::string out = "f0,f1,f2,f3,label\n";
  auto sink = std::back_inserter(out);
  for (int64_t i = 0; i < rows; ++i) {
    const uint32_t label = engine() % 3;
    for (double centre : kCentres[label]) fmt::format_to(sink, "{:.3f},", centre + normal());
    fmt::format_to(sink, "{}\n", label);
  }
  return out;
}

}  // namespace elasticdl::client
