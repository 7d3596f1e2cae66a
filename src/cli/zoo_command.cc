#include "cli/zoo_command.h"

#include <fmt/format.h>

#include <memory>

#include "cli/command_support.h"
#include "client/zoo_image.h"
#include "client/zoo_init.h"

namespace elasticdl::cli {
namespace {

// `zoo init DIR --template=NAME`: a new zoo from a template.
void AddInit(CLI::App* zoo, int* exit_code) {
  auto options = std::make_shared<client::ZooInitOptions>();
  CLI::App* init = zoo->add_subcommand(
      "init",
      "Start a model zoo from a template: a commented model file that trains as it is, and a "
      "README.md with the commands that make its data, train, evaluate and predict");
  init->add_option("DIR", options->dir, "The new zoo's directory (created, or empty)")->required();
  std::string templates;
  for (const client::ZooTemplate& t : client::ZooTemplates()) {
    templates += fmt::format("\n  {}: {}", t.name, t.summary);
  }
  init->add_option("--template", options->template_name, "The template:" + templates)
      ->capture_default_str();
  init->callback([options, exit_code] {
    StatusOr<client::ZooInitResult> result = client::InitZoo(*options);
    if (!result.ok()) {
      *exit_code = ReportError(result.status());
      return;
    }
    fmt::print("wrote the {} template into {}:\n", options->template_name, result->dir);
    for (const std::string& file : result->files) fmt::print("  {}/{}\n", result->dir, file);
    fmt::print("next: {}\n  then the commands in {}/README.md\n", result->next_command,
               result->dir);
  });
}

}  // namespace

void AddZooCommand(CLI::App* app, int* exit_code) {
  CLI::App* zoo = app->add_subcommand(
      "zoo", "Model zoos: start one from a template; build and push its container image");
  zoo->require_subcommand(1);
  AddInit(zoo, exit_code);
  auto options = std::make_shared<client::ZooImageOptions>();

  CLI::App* build = zoo->add_subcommand(
      "build",
      "Compile the zoo and build an image of it on --base_image with docker, podman or buildah");
  build->add_option("--model_zoo", options->model_zoo, "The zoo: a directory or a Git URL")
      ->required();
  build->add_option("--image", options->image, "The image's name, e.g. registry/team/zoo:v1")
      ->required();
  build
      ->add_option("--base_image", options->base_image,
                   "An image with elasticdl on its PATH (and its libraries)")
      ->required();
  build->add_option("--context_dir", options->context_dir,
                    "Where the build context goes (default: a directory under $TMPDIR)");
  build->add_option("--builder", options->builder,
                    "docker, podman or buildah (default: the first on PATH)");
  build->callback([options, exit_code] {
    Status s = client::BuildZooImage(*options);
    if (!s.ok()) {
      *exit_code = ReportError(s);
      return;
    }
    fmt::print("built {}; push it with `elasticdl zoo push --image={}`\n", options->image,
               options->image);
  });

  CLI::App* push = zoo->add_subcommand("push", "Push the zoo's image to its registry");
  push->add_option("--image", options->image, "The image's name")->required();
  push->add_option("--builder", options->builder,
                   "docker, podman or buildah (default: the first on PATH)");
  push->callback([options, exit_code] {
    Status s = client::PushZooImage(*options);
    if (!s.ok()) {
      *exit_code = ReportError(s);
      return;
    }
    fmt::print("pushed {}\n", options->image);
  });
}

}  // namespace elasticdl::cli
