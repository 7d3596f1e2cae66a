#include "client/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace elasticdl::client {

ProgressBar::ProgressBar(cluster::LogSink* sink, bool enabled)
    : sink_(sink), enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1) {
  if (enabled_ && tty_) sink_->SetObserver(this);
}

ProgressBar::~ProgressBar() { Finish(); }

std::string ProgressBar::Render(const proto::GetJobStatusResponse& s) const {
  double fraction =
      s.records_total() > 0 ? std::min(1.0, double(s.records_done()) / s.records_total()) : 0;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  std::string line = fmt::format("[{}] {:3.0f}% {}/{} records", bar, fraction * 100,
                                 s.records_done(), s.records_total());
  if (s.type() == proto::JOB_TRAINING) {
    line +=
        fmt::format(" | epoch {}/{} | version {} | loss {:.4f}", s.epoch() + 1,
                    s.num_epochs() > 0 ? s.num_epochs() : 1, s.model_version(), s.recent_loss());
  }
  line +=
      fmt::format(" | {:.0f} records/s | {} workers", s.records_per_second(), s.workers_alive());
  return line;
}

void ProgressBar::Update(const proto::GetJobStatusResponse& status) {
  if (!enabled_) return;
  std::string line = Render(status);
  if (tty_) {
    sink_->Exclusive([&](std::FILE* out) {
      line_ = line;
      std::fprintf(out, "\r\033[K%s", line_.c_str());
      std::fflush(out);
    });
    return;
  }
  auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < std::chrono::seconds(5)) return;
  last_print_ = now;
  sink_->Line("progress", line);
}

void ProgressBar::Finish() {
  if (!enabled_ || !tty_) return;
  sink_->Exclusive([&](std::FILE* out) {
    if (!line_.empty()) std::fprintf(out, "\r\033[K");
    line_.clear();
    std::fflush(out);
  });
  sink_->SetObserver(nullptr);
}

void ProgressBar::BeforeWrite(std::FILE* out) {
  if (!line_.empty()) std::fprintf(out, "\r\033[K");
}

void ProgressBar::AfterWrite(std::FILE* out) {
  if (!line_.empty()) {
    std::fprintf(out, "%s", line_.c_str());
    std::fflush(out);
  }
}

}  // namespace elasticdl::client
