#include "engine/progress_line.h"

#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <sstream>

namespace sjd::engine {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream out;
  out << std::setfill('0');
  if (s >= 3600) {
    out << s / 3600 << "h" << std::setw(2) << (s / 60) % 60 << "m" << std::setw(2) << s % 60 << "s";
  } else if (s >= 60) {
    out << s / 60 << "m" << std::setw(2) << s % 60 << "s";
  } else {
    out << s << "s";
  }
  return out.str();
}

std::string decode_progress_text(const decoding::StepProgress& p, double elapsed_seconds) {
  std::ostringstream out;
  out << "tokens " << p.tokens_done << "/" << p.tokens_total << "  steps " << p.steps << std::fixed
      << std::setprecision(2) << "  " << (p.steps > 0 ? static_cast<double>(p.tokens_done) / p.steps : 0.0)
      << " tokens/step";
  if (elapsed_seconds > 0.0 && p.tokens_done > 0) {
    const double rate = static_cast<double>(p.tokens_done) / elapsed_seconds;
    out << std::setprecision(0) << "  " << rate << " tokens/s  ETA "
        << format_duration(static_cast<double>(p.tokens_total - p.tokens_done) / rate);
  }
  return out.str();
}

std::string count_progress_text(int64_t done, int64_t total, int64_t made, double elapsed_seconds,
                                const std::string& label) {
  std::ostringstream out;
  out << "[" << done << "/" << total << "]";
  if (!label.empty()) out << " " << label;
  if (made > 0 && done < total) {
    out << "  ETA " << format_duration(elapsed_seconds / static_cast<double>(made) * static_cast<double>(total - done));
  }
  return out.str();
}

namespace {

// SJD_PROGRESS_INTERVAL (seconds, 0 or more) replaces the caller's interval: 0 shows every
// update, which the tests need to see a line within an image whatever the machine's speed;
// anything else that is not a number is ignored.
double interval_from_environment(double fallback) {
  const char* text = std::getenv("SJD_PROGRESS_INTERVAL");
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  return (*end == '\0' && seconds >= 0.0) ? seconds : fallback;
}

}  // namespace

ProgressLine::ProgressLine(std::ostream& out, bool enabled, double min_interval_seconds)
    : out_(out),
      enabled_(enabled),
      min_interval_(std::chrono::duration<double>(interval_from_environment(min_interval_seconds))) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::show(const std::string& text, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (open_ && !force && now - last_ < min_interval_) return;
  last_ = now;
  out_ << "\r" << text;
  if (text.size() < shown_width_) out_ << std::string(shown_width_ - text.size(), ' ');
  out_ << std::flush;
  shown_width_ = text.size();
  open_ = true;
}

void ProgressLine::finish() {
  if (!open_) return;
  out_ << "\n" << std::flush;
  open_ = false;
  shown_width_ = 0;
}

}  // namespace sjd::engine
