// The progress line's text and its terminal behaviour (engine/progress_line.h).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>

#include "engine/progress_line.h"

using namespace sjd::engine;

TEST_CASE("progress line: durations, decode progress and counts read as a person expects", "[engine][progress]") {
  CHECK(format_duration(4.4) == "4s");
  CHECK(format_duration(125) == "2m05s");
  CHECK(format_duration(3723) == "1h02m03s");
  CHECK(format_duration(-1) == "?");
  // 120 of 277 tokens in 40 steps after 2 s: 60 tokens/s, 157 tokens left.
  CHECK(decode_progress_text({120, 277, 40}, 2.0) == "tokens 120/277  steps 40  3.00 tokens/step  60 tokens/s  ETA 3s");
  CHECK(decode_progress_text({0, 277, 0}, 0.0) == "tokens 0/277  steps 0  0.00 tokens/step");
  // 5 of 20 done, 2 of them made in 10 s (3 resumed): 15 left at 5 s each.
  CHECK(count_progress_text(5, 20, 2, 10.0, "sjd") == "[5/20] sjd  ETA 1m15s");
  CHECK(count_progress_text(3, 20, 0, 0.0, "") == "[3/20]");
  CHECK(count_progress_text(20, 20, 20, 9.0, "done") == "[20/20] done");
}

TEST_CASE("progress line: rewrites one line with carriage returns, and nothing when disabled", "[engine][progress]") {
  std::ostringstream off;
  {
    ProgressLine line(off, false);
    line.show("tokens 1/2", true);
  }
  CHECK(off.str().empty());

  std::ostringstream on;
  {
    ProgressLine line(on, true, 0.0);
    line.show("tokens 10/277", true);
    line.show("tokens 9", true);  // shorter: padded over the old text
  }  // destruction ends the line
  CHECK(on.str() == "\rtokens 10/277\rtokens 9     \n");

  std::ostringstream throttled;
  ProgressLine line(throttled, true, 3600.0);
  line.show("a");
  line.show("b");  // within the interval: skipped
  line.show("c", true);
  line.finish();
  CHECK(throttled.str() == "\ra\rc\n");
}

TEST_CASE("progress line: SJD_PROGRESS_INTERVAL replaces the interval, a value that is not one is ignored",
          "[engine][progress]") {
  const auto shown = [](const char* interval) {
    if (interval != nullptr) setenv("SJD_PROGRESS_INTERVAL", interval, 1);
    std::ostringstream out;
    {
      ProgressLine line(out, true, 3600.0);
      line.show("a");
      line.show("b");
    }
    unsetenv("SJD_PROGRESS_INTERVAL");
    return out.str();
  };
  CHECK(shown("0") == "\ra\rb\n");  // every update
  CHECK(shown(nullptr) == "\ra\n");  // the caller's hour
  CHECK(shown("-1") == "\ra\n");
  CHECK(shown("soon") == "\ra\n");
}
