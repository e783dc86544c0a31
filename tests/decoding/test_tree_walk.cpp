// How WindowVerifier walks an SJD-PAC tree window: the path an accepted sibling
// starts goes on through the levels below it, a forced token's level of one
// candidate included (its node sits under every path of the window). The
// distribution side of it is the chi-square cases of test_exactness.cpp, whose
// column layout puts a row end below the code where a sibling wins.
#include <catch2/catch.hpp>

#include <vector>

#include "decoding/window_verifier.h"
#include "forced_level_window.h"

using namespace sjd;
using sjd::testing::ForcedLevelWindow;

TEST_CASE("a sibling's path goes on through a forced token's one-candidate level", "[decoding][tree]") {
  ForcedLevelWindow w(5, 0);
  REQUIRE(w.tree.size() == 3);
  REQUIRE(w.tree[0].candidates.size() == 3);
  REQUIRE(w.tree[1].candidates == std::vector<int64_t>{ForcedLevelWindow::kRowEnd});
  REQUIRE(w.tree[2].candidates.size() == 3);

  const decoding::WindowVerifier verifier(w.method, decoding::Mutants{}, 5, 0);
  const decoding::WindowInput input{ForcedLevelWindow::kFirst, w.layout.length(), ForcedLevelWindow::kChain,
                                    &w.nodes, &w.child_of, w.probs, 0};
  const decoding::WindowOutcome out = verifier.verify(input, w.book);

  INFO("path of " << out.path.size() << " nodes, " << out.tokens.size() << " tokens");
  REQUIRE(out.path.size() == 3);  // sibling, row end, the third level's first candidate
  for (int node : out.path) CHECK(node >= ForcedLevelWindow::kChain);  // all off the spine
  CHECK(out.tokens ==
        std::vector<int64_t>{w.tree[0].candidates[1], ForcedLevelWindow::kRowEnd, w.tree[2].candidates[0], 0});
  CHECK_FALSE(out.rejected);
  CHECK(out.sibling_accepts == 1);
}
