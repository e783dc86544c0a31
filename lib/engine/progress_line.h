#pragma once
// One status line that rewrites itself on a terminal ("\r"): generate's tokens
// and steps, compare's and batch's count of runs with an ETA. The commands show
// it only when stderr is a terminal and --quiet is not given, so logs and pipes
// get no carriage returns. The text formatting is separate from the writing, so
// it is tested as plain strings.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "decoding/decoder.h"

namespace sjd::engine {

// "45s", "2m05s", "1h02m03s"; "?" for a negative or non-finite estimate.
std::string format_duration(double seconds);

// "tokens 120/277  steps 40  3.00 tokens/step  250 tokens/s  ETA 1s" for a decode
// `elapsed_seconds` after it started.
std::string decode_progress_text(const decoding::StepProgress& progress, double elapsed_seconds);

// "[3/12] label  ETA 1m02s": `done` of `total` finished, of which `made` were made
// in `elapsed_seconds` (the others were skipped, e.g. already done by an earlier run),
// so the ETA is the time per made item times the items left.
std::string count_progress_text(int64_t done, int64_t total, int64_t made, double elapsed_seconds,
                                const std::string& label);

class ProgressLine {
 public:
  // Writes nothing unless `enabled`; rewrites at most every `min_interval_seconds`, or
  // SJD_PROGRESS_INTERVAL seconds when that is set (a forced show() always writes).
  ProgressLine(std::ostream& out, bool enabled, double min_interval_seconds = 0.1);
  ~ProgressLine();  // finishes the line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Replaces the line's text (padding over a longer previous text).
  void show(const std::string& text, bool force = false);
  // Ends the line with a newline when one was shown, so the next output starts clean.
  void finish();

 private:
  std::ostream& out_;
  bool enabled_;
  std::chrono::duration<double> min_interval_;
  std::chrono::steady_clock::time_point last_{};
  size_t shown_width_ = 0;
  bool open_ = false;
};

}  // namespace sjd::engine
