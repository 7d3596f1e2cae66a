#include "cluster/log_sink.h"

namespace elasticdl::cluster {
namespace {

// The length of the longest prefix of `s` of at most `max` bytes that does
// not end inside a UTF-8 character. Bytes that are not UTF-8 are cut at `max`.
size_t Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s.size();
  for (size_t n = max; n > 0 && max - n < 4; --n) {
    if ((static_cast<unsigned char>(s[n]) & 0xC0) != 0x80) return n;  // not a continuation byte
  }
  return max;
}

// Appends `line` (no newline in it) to `out` as one or more labelled lines
// (unlabelled with an empty label).
void AppendLabelled(std::string* out, std::string_view label, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  do {
    size_t n = Utf8Prefix(line, LogSink::kMaxLineBytes);
    if (!label.empty()) out->append("[").append(label).append("] ");
    out->append(line.substr(0, n)).push_back('\n');
    line.remove_prefix(n);
  } while (!line.empty());
}

}  // namespace

void LogSink::Line(std::string_view label, std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  std::string buffer;
  buffer.reserve(text.size() + label.size() + 4);
  for (size_t start = 0;;) {
    size_t newline = text.find('\n', start);
    AppendLabelled(&buffer, label, text.substr(start, newline - start));
    if (newline == std::string_view::npos) break;
    start = newline + 1;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (observer_ != nullptr) observer_->BeforeWrite(out_);
  std::fwrite(buffer.data(), 1, buffer.size(), out_);
  std::fflush(out_);
  if (observer_ != nullptr) observer_->AfterWrite(out_);
}

void LogSink::Exclusive(const std::function<void(std::FILE*)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(out_);
}

void LogSink::SetObserver(LineObserver* observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = observer;
}

void LineWriter::Append(std::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  std::string_view rest = pending_;
  size_t last_newline = rest.rfind('\n');
  if (last_newline != std::string_view::npos) {
    sink_->Line(label_, rest.substr(0, last_newline + 1));
    rest.remove_prefix(last_newline + 1);
  }
  // What is left has no newline; a line that will not fit goes out in pieces.
  while (rest.size() > LogSink::kMaxLineBytes) {
    size_t n = Utf8Prefix(rest, LogSink::kMaxLineBytes);
    sink_->Line(label_, rest.substr(0, n));
    rest.remove_prefix(n);
  }
  pending_.erase(0, pending_.size() - rest.size());
}

void LineWriter::Flush() {
  if (pending_.empty()) return;
  sink_->Line(label_, pending_);
  pending_.clear();
}

}  // namespace elasticdl::cluster
