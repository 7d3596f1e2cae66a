// `elasticdl zoo init DIR --template=NAME`: a new model zoo that runs as it
// is, so that a modeler starts from a working model and edits it.
//
// A template is a directory of files installed beside the binary
// (share/zoo_templates/<name>/, kept in the repository under the same
// path): a commented model file and a README.md with the commands that make
// the data, train, evaluate and predict. InitZoo copies it into DIR; the
// tabular template also gets a generated CSV data set (data/train.csv,
// data/test.csv). No LibTorch.
#ifndef ELASTICDL_CLIENT_ZOO_INIT_H_
#define ELASTICDL_CLIENT_ZOO_INIT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "elasticdl/status.h"

namespace elasticdl::client {

// A template `zoo init` knows.
struct ZooTemplate {
  // Its name (--template) and its directory under the templates directory.
  std::string_view name;
  // One line for --help.
  std::string_view summary;
  // The first command to run after `zoo init`, with "{zoo}" where the new
  // zoo's directory goes (its README.md holds it and the rest).
  std::string_view next_command;
  // The model file, relative to the zoo: "mnist/model.cc".
  std::string_view model_file;
};

// mnist, pytorch, tabular and trial, in that order.
const std::vector<ZooTemplate>& ZooTemplates();

// "mnist, pytorch, tabular, trial": the names, for messages.
std::string ZooTemplateNames();

struct ZooInitOptions {
  // The new zoo's directory: created with its missing parents, or an
  // existing empty directory.
  std::string dir;
  // Which template (ZooTemplates()). Default: mnist.
  std::string template_name = "mnist";
  // Where the templates lie, one directory each. Empty: those installed
  // beside the binary (InstalledShareDir("zoo_templates")).
  std::string templates_dir;
};

struct ZooInitResult {
  // The zoo's directory as given (normalized: "my_zoo/" is "my_zoo").
  std::string dir;
  // The files written, relative to `dir`, sorted.
  std::vector<std::string> files;
  // The template's next command, for this directory.
  std::string next_command;
};

// Writes the template into options.dir. Every file's text has "{{zoo}}"
// replaced by the directory as given, so that a README's commands name it as
// the user does (they run from the directory `zoo init` ran in).
//
// Errors, each with nothing written: INVALID_ARGUMENT for an unknown
// template (listing the known ones) or an empty `dir`; ALREADY_EXISTS when
// `dir` exists and is not an empty directory; NOT_FOUND when the template's
// files are missing (an installation without share/elasticdl/zoo_templates);
// the failed system call's code when `dir` cannot be created or written (a
// failure half-way removes what was written).
StatusOr<ZooInitResult> InitZoo(const ZooInitOptions& options);

// The tabular template's data set: `rows` rows of a synthetic 3-class
// problem, a header `f0,f1,f2,f3,label` and one row a line (four features
// with three decimals, the class 0, 1 or 2). Each class is a Gaussian
// cloud of unit variance around a centre of its own, 3.2 to 3.4 apart from
// the others' (the best classifier is right 92 % of the time). The
// same `rows` and `seed` give the same text on every machine.
std::string SyntheticTabularCsv(int64_t rows, uint32_t seed);

}  // namespace elasticdl::client

#endif  // ELASTICDL_CLIENT_ZOO_INIT_H_
