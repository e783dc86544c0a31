// How WindowVerifier walks an SJD-PAC tree window: the path an accepted sibling
// starts goes on through the levels below it, a forced token's level of one
// candidate included (its node sits under every path of the window). The
// distribution side of it is the chi-square cases of test_exactness.cpp, whose
// small layout puts a forced row end inside every depth-3 tree.
#include <catch2/catch.hpp>

#include <vector>

#include "decoding/window_verifier.h"

using namespace sjd;

namespace {

constexpr int64_t kVocab = 12;    // codes 0..9, then the row end 11
constexpr int64_t kRowEnd = 11;
constexpr uint64_t kSeed = 5;

// Three rows of two codes, each ended by the forced row end.
family::TokenLayout rows_of_two() {
  return family::TokenLayout(kVocab, {-1, -1, kRowEnd, -1, -1, kRowEnd, -1, -1, kRowEnd}, 3, 2, 0, 10);
}

}  // namespace

TEST_CASE("a sibling's path goes on through a forced token's one-candidate level", "[decoding][tree]") {
  const family::TokenLayout layout = rows_of_two();
  decoding::MethodConfig method = decoding::make_method("sjd-pac");
  method.window = 4;
  method.pd_k = 3;
  method.pd_depth = 3;
  decoding::DraftBook book(layout, method, decoding::Mutants{}, kSeed, 0);
  const decoding::WindowVerifier verifier(method, decoding::Mutants{}, kSeed, 0);
  const std::vector<int64_t> committed = {5};  // the window starts at position 1: code, row end, code
  const int chain = 4;
  book.fill(committed, chain, 0);
  book.grow_tree(method.pd_k, method.pd_depth, 0);
  const std::vector<decoding::TreeLevel> tree = book.tree();  // verify() hands the book its next drafts
  REQUIRE(tree.size() == 3);
  REQUIRE(tree[0].candidates.size() == 3);
  REQUIRE(tree[1].candidates == std::vector<int64_t>{kRowEnd});
  REQUIRE(tree[2].candidates.size() == 3);

  model::DraftTree nodes;
  std::vector<std::vector<int>> child_of;
  decoding::build_window(book, chain, nodes, child_of);
  // Every slot's p is one token: the root's is the first level's second candidate (so the spine
  // draft is rejected and that sibling accepted), a row end's slot the row end, every other slot
  // the first candidate of the level it predicts (code 0 past the tree).
  at::Tensor probs = at::zeros({1 + static_cast<int64_t>(nodes.size()), kVocab});
  probs[0][tree[0].candidates[1]] = 1.0f;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t position = 1 + nodes.depth[i];  // a node of depth d predicts the window's position d
    const size_t level = static_cast<size_t>(nodes.depth[i]);
    const int64_t token = layout.forced(position) >= 0 ? layout.forced(position)
                          : level < tree.size()         ? tree[level].candidates[0]
                                                        : 0;
    probs[static_cast<int64_t>(i) + 1][token] = 1.0f;
  }
  const decoding::WindowInput input{1, layout.length(), chain, &nodes, &child_of, probs, 0};
  const decoding::WindowOutcome out = verifier.verify(input, book);

  INFO("path of " << out.path.size() << " nodes, " << out.tokens.size() << " tokens");
  REQUIRE(out.path.size() == 3);  // sibling, row end, the third level's first candidate
  for (int node : out.path) CHECK(node >= chain);  // all off the spine
  CHECK(out.tokens == std::vector<int64_t>{tree[0].candidates[1], kRowEnd, tree[2].candidates[0], 0});
  CHECK_FALSE(out.rejected);
  CHECK(out.sibling_accepts == 1);
}
