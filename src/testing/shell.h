// A child process that runs a shell script, for the process layer's tests.

#ifndef ELASTICDL_TESTING_SHELL_H_
#define ELASTICDL_TESTING_SHELL_H_

#include <string>
#include <utility>

#include "cluster/process.h"

namespace elasticdl::testing {

inline cluster::ProcessSpec Shell(std::string label, std::string script) {
  cluster::ProcessSpec spec;
  spec.label = std::move(label);
  spec.argv = {"/bin/sh", "-c", std::move(script)};
  return spec;
}

}  // namespace elasticdl::testing

#endif  // ELASTICDL_TESTING_SHELL_H_
