#include "common/log_label.h"

#include <mutex>
#include <utility>

namespace elasticdl {
namespace {

std::mutex& Mutex() {
  static std::mutex mu;
  return mu;
}

std::string& Label() {
  static std::string label;
  return label;
}

}  // namespace

void SetLogLabel(std::string label) {
  std::lock_guard<std::mutex> lock(Mutex());
  Label() = std::move(label);
}

std::string LogLabel() {
  std::lock_guard<std::mutex> lock(Mutex());
  return Label();
}

}  // namespace elasticdl
