#include "dashboard/log_tail.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iterator>

namespace elasticdl::dashboard {

void LogTail::Poll(const std::function<void(const nlohmann::json&)>& apply) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(offset_));
  const std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = 0;
  for (size_t end; (end = chunk.find('\n', start)) != std::string::npos; start = end + 1) {
    const nlohmann::json event = nlohmann::json::parse(
        chunk.begin() + static_cast<std::ptrdiff_t>(start),
        chunk.begin() + static_cast<std::ptrdiff_t>(end), nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) continue;
    try {
      apply(event);
    } catch (const nlohmann::json::exception& e) {
      spdlog::warn("{}: skipping the event at byte {}: {}", path_, offset_ + start, e.what());
    }
  }
  offset_ += start;  // a partial last line is read again next time
}

}  // namespace elasticdl::dashboard
