// The widths CUDA graphs pad a window to (StepGraphs::padded_width): host arithmetic,
// so it is tested here; tests/cuda holds padded graphed forwards to eager ones.
#include <catch2/catch.hpp>

#include <set>

#include "model/step_graphs.h"

using sjd::model::StepGraphs;

TEST_CASE("graph widths: small windows and the fixed L = 16, 32, 64 as they are, others padded", "[model]") {
  for (int64_t w = 1; w <= 5; ++w) CHECK(StepGraphs::padded_width(w) == w);
  CHECK(StepGraphs::padded_width(6) == 7);     // 5 nodes -> 6
  CHECK(StepGraphs::padded_width(8) == 9);     // 7 -> 8
  CHECK(StepGraphs::padded_width(10) == 13);   // 9 -> 12
  CHECK(StepGraphs::padded_width(17) == 17);   // L = 16
  CHECK(StepGraphs::padded_width(18) == 25);   // 17 -> 24
  CHECK(StepGraphs::padded_width(33) == 33);   // L = 32
  CHECK(StepGraphs::padded_width(34) == 49);   // 33 -> 48
  CHECK(StepGraphs::padded_width(65) == 65);   // L = 64
  CHECK(StepGraphs::padded_width(66) == 97);   // 65 -> 96
  // Every width up to 65 falls on 13 shapes, never below the window and at most 1.5x it; with
  // SJD-PAC's largest automatic tree (145 nodes) on 16, all within kMaxShapes.
  std::set<int64_t> shapes;
  for (int64_t w = 1; w <= 65; ++w) {
    const int64_t p = StepGraphs::padded_width(w);
    CHECK(p >= w);
    CHECK(p * 2 <= w * 3);
    shapes.insert(p);
  }
  CHECK(shapes.size() == 13);
  for (int64_t w = 66; w <= 146; ++w) shapes.insert(StepGraphs::padded_width(w));
  CHECK(shapes.size() == 16);
  CHECK(shapes.size() <= StepGraphs::kMaxShapes);
  // A width past any cache (a hostile shape's estimate) is left as it is, not stepped into an overflow.
  CHECK(StepGraphs::padded_width(int64_t{1} << 62) == int64_t{1} << 62);
}
