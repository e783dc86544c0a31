// The widths CUDA graphs pad a window to (StepGraphs::padded_width): host arithmetic,
// so it is tested here; tests/cuda holds padded graphed forwards to eager ones.
#include <catch2/catch.hpp>

#include <set>

#include "model/step_graphs.h"

using sjd::model::StepGraphs;

TEST_CASE("graph widths: small windows and the fixed L = 16, 32, 64 as they are, others padded", "[model]") {
  for (int64_t w = 1; w <= 5; ++w) CHECK(StepGraphs::padded_width(w, 1000) == w);
  CHECK(StepGraphs::padded_width(6, 1000) == 7);     // 5 nodes -> 6
  CHECK(StepGraphs::padded_width(8, 1000) == 9);     // 7 -> 8
  CHECK(StepGraphs::padded_width(10, 1000) == 13);   // 9 -> 12
  CHECK(StepGraphs::padded_width(17, 1000) == 17);   // L = 16
  CHECK(StepGraphs::padded_width(18, 1000) == 25);   // 17 -> 24
  CHECK(StepGraphs::padded_width(33, 1000) == 33);   // L = 32
  CHECK(StepGraphs::padded_width(34, 1000) == 49);   // 33 -> 48
  CHECK(StepGraphs::padded_width(65, 1000) == 65);   // L = 64
  CHECK(StepGraphs::padded_width(66, 1000) == 97);   // 65 -> 96
  // Every width up to 65 falls on 13 shapes (room for all in kMaxShapes), never below the window
  // and at most 1.5x it.
  std::set<int64_t> shapes;
  for (int64_t w = 1; w <= 65; ++w) {
    const int64_t p = StepGraphs::padded_width(w, 1000);
    CHECK(p >= w);
    CHECK(p * 2 <= w * 3);
    shapes.insert(p);
  }
  CHECK(shapes.size() == 13);
  CHECK(shapes.size() <= StepGraphs::kMaxShapes);
}

TEST_CASE("graph widths: a padding the cache has no room for is not made", "[model]") {
  CHECK(StepGraphs::padded_width(6, 6) == 6);
  CHECK(StepGraphs::padded_width(18, 24) == 18);
  CHECK(StepGraphs::padded_width(18, 25) == 25);
  CHECK(StepGraphs::padded_width(3, 2) == 3);  // small windows are never padded; the cache's own check decides
}
