#include "cli/export_command.h"

#include <fmt/format.h>

#include <memory>

#include "cli/command_support.h"
#include "client/export.h"

namespace elasticdl::cli {

void AddExportCommand(CLI::App* app, int* exit_code) {
  auto options = std::make_shared<client::ExportOptions>();
  CLI::App* cmd = app->add_subcommand(
      "export",
      "Write a trained model for PyTorch: TorchScript for a Python model file's (torch.jit.load), "
      "the state_dict for a C++ file's (torch.load)");
  cmd->add_option("--trained_model", options->trained_model,
                  "The trained-model directory (train --output)")
      ->required();
  cmd->add_option("--output", options->output, "The file to write, e.g. model.pt")->required();
  cmd->add_option("--data", options->data,
                  "Records of the model's input (a file, or a directory or glob as the jobs' "
                  "data flags take): torch.jit.trace runs the first file's first records "
                  "where torch.jit.script cannot compile the model");
  cmd->callback([options, exit_code] {
    StatusOr<client::ExportResult> result = client::ExportModel(*options);
    if (!result.ok()) {
      *exit_code = ReportError(result.status());
      return;
    }
    if (!result->script_error.empty()) {
      fmt::print(
          "torch.jit.script could not compile the model ({}); traced it on the first "
          "records of {} instead\n",
          result->script_error, options->data);
    }
    fmt::print("exported {} tensors as {} to {}\n", result->tensors, result->format,
               options->output);
  });
}

}  // namespace elasticdl::cli
