// The label a process's lines carry in a job's log ("worker-1", "ps-0"): set
// once by the command that runs the role, read by whatever writes lines of
// its own beside the process's logger (the Python interpreter's print()).
#ifndef ELASTICDL_COMMON_LOG_LABEL_H_
#define ELASTICDL_COMMON_LOG_LABEL_H_

#include <string>

namespace elasticdl {

// Thread-safe.
void SetLogLabel(std::string label);
// Empty until SetLogLabel.
std::string LogLabel();

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_LOG_LABEL_H_
