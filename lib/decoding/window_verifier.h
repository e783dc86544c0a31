#pragma once
// Verification of one window: walks the draft chain (and, after a proactive
// drafting step, the tree levels) with the shared primitives, commits what it
// accepts plus one residual or bonus token, and prepares the next drafts.
#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "decoding/draft_book.h"
#include "decoding/method.h"
#include "decoding/mutants.h"
#include "model/token_model.h"

namespace sjd::decoding {

struct WindowOutcome {
  std::vector<int> path;          // accepted draft nodes, root to leaf
  std::vector<int64_t> tokens;    // committed tokens (the path's, then the residual/bonus if any)
  bool rejected = false;          // a draft was rejected (proactive drafting follows)
  bool tree_window = false;       // the window held proactive-drafting tree levels
  int sibling_accepts = 0;        // tree levels where a candidate other than the first won
};

struct WindowInput {
  int64_t first_position;         // generated index predicted by the root slot
  int64_t total_length;           // generated tokens in the layout
  int chain_length;               // spine/chain draft nodes (nodes 0 .. chain_length-1)
  const model::DraftTree* nodes;
  // child_of[slot][candidate]: node index of the child of that slot's node with
  // that candidate, for tree levels; empty when the window is a plain chain.
  const std::vector<std::vector<int>>* child_of;
  at::Tensor probs;               // [1 + nodes, V] after the logits pipeline
  uint32_t step;
};

// The window of `chain` spine drafts and the book's tree levels as draft nodes:
// the chain (spine) first, so accepting the spine needs no KV copies; then, for
// tree levels, every other candidate under every node of the level above.
// child_of[slot][k] is the node holding candidate k under the node in `slot`
// (slot 0: the root).
void build_window(const DraftBook& book, int chain, model::DraftTree& nodes, std::vector<std::vector<int>>& child_of);

// After a window committed `committed` tokens: every later position with a fresh p on the spine (up
// to the chain's end and the image's) remembers that p and takes its next draft from
// `draft_for(slot, p, old)` (old: the draft verified in that slot, null past the chain), one window
// older than `old`; the book then holds those drafts. Both verifiers (this one and the device's)
// update the book through it.
using NextDraftFn = std::function<Draft(int slot, const at::Tensor& p, const Draft* old)>;
void adopt_next_drafts(const WindowInput& in, size_t committed, DraftBook& book, const NextDraftFn& draft_for);
// How many next drafts adopt_next_drafts asks for after `committed` tokens.
int next_draft_count(const WindowInput& in, size_t committed);

class WindowVerifier {
 public:
  WindowVerifier(const MethodConfig& method, const Mutants& mutants, uint64_t seed, uint32_t sequence)
      : method_(method), mutants_(mutants), seed_(seed), sequence_(sequence) {}

  // AR: sample the root slot's p.
  WindowOutcome sample_one(const WindowInput& in) const;
  // Speculative: verify, commit, and hand the next drafts to `book` (without a
  // tree: the caller grows one with DraftBook::grow_tree after a rejection).
  WindowOutcome verify(const WindowInput& in, DraftBook& book) const;

 private:
  sampling::RngKey key(uint32_t step, int64_t position, sampling::Purpose purpose, uint32_t sub = 0) const;
  sampling::VerifyOutcome verify_level(const float* p, const std::vector<TreeLevel>& tree, int depth, double weight,
                                       const WindowInput& in, int slot) const;
  int longest_path(const WindowInput& in, const std::vector<TreeLevel>& tree, int slot, int depth) const;

  const MethodConfig& method_;
  Mutants mutants_;
  uint64_t seed_;
  uint32_t sequence_;
};

}  // namespace sjd::decoding
