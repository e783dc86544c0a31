#pragma once
// An SJD-PAC tree window whose path leaves the spine and meets a forced token's
// level of one candidate: three rows of two codes (0..9), each ended by the row
// end 11, the window starting at position 1, so its tree's levels are a code,
// the row end and a code. Every slot's p is one token: the root's is the first
// level's second candidate (the spine draft is rejected, that sibling accepted),
// a row end's slot the row end, every other slot the first candidate of the level
// it predicts (code 0 past the tree). The CPU test (test_tree_walk.cpp) and the
// device's (tests/cuda/test_verify_cuda.cpp) verify it.
#include <ATen/ATen.h>

#include <vector>

#include "decoding/draft_book.h"
#include "decoding/method.h"
#include "family/token_layout.h"
#include "model/token_model.h"

namespace sjd::testing {

// Holds what its book refers to: built in place, neither copied nor moved.
struct ForcedLevelWindow {
  static constexpr int64_t kVocab = 12;
  static constexpr int64_t kRowEnd = 11;
  static constexpr int64_t kFirst = 1;  // the window's first position
  static constexpr int kChain = 4;

  ForcedLevelWindow(uint64_t seed, uint32_t sequence);
  ForcedLevelWindow(const ForcedLevelWindow&) = delete;
  ForcedLevelWindow& operator=(const ForcedLevelWindow&) = delete;

  family::TokenLayout layout;
  decoding::MethodConfig method;
  decoding::DraftBook book;
  std::vector<decoding::TreeLevel> tree;  // the book's tree (verify() hands the book its next drafts)
  model::DraftTree nodes;
  std::vector<std::vector<int>> child_of;
  at::Tensor probs;  // [1 + nodes, kVocab]
};

}  // namespace sjd::testing
