#include "forced_level_window.h"

#include "decoding/window_verifier.h"

namespace sjd::testing {
namespace {

decoding::MethodConfig tree_method() {
  decoding::MethodConfig method = decoding::make_method("sjd-pac");
  method.window = ForcedLevelWindow::kChain;
  method.pd_k = 3;
  method.pd_depth = 3;
  return method;
}

}  // namespace

ForcedLevelWindow::ForcedLevelWindow(uint64_t seed, uint32_t sequence)
    : layout(kVocab, {-1, -1, kRowEnd, -1, -1, kRowEnd, -1, -1, kRowEnd}, 3, 2, 0, 10),
      method(tree_method()),
      book(layout, method, decoding::Mutants{}, seed, sequence) {
  book.fill({5}, kChain, 0);
  book.grow_tree(method.pd_k, method.pd_depth, 0);
  tree = book.tree();
  decoding::build_window(book, kChain, nodes, child_of);
  probs = at::zeros({1 + static_cast<int64_t>(nodes.size()), kVocab});
  if (tree.size() < 3 || tree[0].candidates.size() < 2) return;  // the tests check the tree's shape
  probs[0][tree[0].candidates[1]] = 1.0f;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t position = kFirst + nodes.depth[i];  // a node of depth d predicts the window's position d
    const size_t level = static_cast<size_t>(nodes.depth[i]);
    const int64_t token = layout.forced(position) >= 0 ? layout.forced(position)
                          : level < tree.size()         ? tree[level].candidates[0]
                                                        : 0;
    probs[static_cast<int64_t>(i) + 1][token] = 1.0f;
  }
}

}  // namespace sjd::testing
