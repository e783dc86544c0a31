#pragma once
// The drafts ahead of the committed prefix: for each upcoming position the
// draft token and the distribution q it was drawn from, the latest p seen for
// positions (stale p, used by sample-left/up and by proactive drafting), and
// the tree levels proactive drafting prepared for the next window. Its
// distributions live on one device: the CPU for the CPU verifier, a GPU when the
// window is verified there (decoding/device_verifier.h).
#include <ATen/ATen.h>

#include <deque>
#include <map>
#include <vector>

#include "decoding/method.h"
#include "decoding/mutants.h"
#include "decoding/window_planner.h"
#include "family/token_layout.h"
#include "sampling/philox.h"
#include "sampling/tensor_draws.h"

namespace sjd::decoding {

struct Draft {
  int64_t token = -1;
  at::Tensor q;  // float [V]: the distribution the token was drawn from
  int age = 0;   // windows that have computed p for this position (0: an initial draft)
};

// K candidates for one tree depth, drawn without replacement from q; the first
// is also the spine draft of that position.
struct TreeLevel {
  std::vector<int64_t> candidates;
  at::Tensor q;
};

// The most float [V] distributions one sequence's draft book keeps alive between
// steps with windows of at most `largest` (for the memory estimate, which must
// count them: for Lumina at L = 64 with sample-up they are about 65 MB a sequence).
// They are the last window's probabilities (its spine slots' rows are the next
// drafts' q's, and a row keeps the whole tensor alive), a point-mass q per new
// initial draft, the uniform initial q (on the device and on the host), and for
// sample-left/up the p's remembered from one grid row back to the window's end.
// Tree levels share their first draft's q.
int64_t draft_distributions(const MethodConfig& method, const WindowShape& largest, const family::TokenLayout& layout);

class DraftBook {
 public:
  DraftBook(const family::TokenLayout& layout, const MethodConfig& method, const Mutants& mutants, uint64_t seed,
            uint32_t sequence, at::Device device = at::kCPU);

  at::Device device() const { return device_; }

  // Makes sure positions first .. first + count - 1 have drafts, initialising new
  // ones by the method's scheme. `committed` is the generated prefix (size first).
  void fill(const std::vector<int64_t>& committed, int64_t count, uint32_t step);
  // fill in two halves, so that a batch draws every sequence's initial drafts from a stale p
  // at once (sample-left/up; on a GPU one kernel and one read: decoder.cpp): plan_fill drops
  // the committed drafts and returns the draws the new positions need, whose tokens (in
  // that order) finish_fill takes to initialise them.
  std::vector<sampling::RowDraw> plan_fill(const std::vector<int64_t>& committed, int64_t count, uint32_t step);
  void finish_fill(const std::vector<int64_t>& committed, const std::vector<int64_t>& drawn);

  const std::deque<Draft>& drafts() const { return drafts_; }
  const std::vector<TreeLevel>& tree() const { return tree_; }
  // The remembered p per position (sample-left/up only; empty otherwise).
  const std::map<int64_t, at::Tensor>& stale_p() const { return stale_p_; }

  // Remembers p for `position` (the latest distribution computed there).
  void remember_p(int64_t position, const at::Tensor& p);
  // Replaces the drafts after a step: `next` are drafts for positions from `first`
  // on; older positions and p's no longer needed are dropped.
  void replace(int64_t first, std::vector<Draft> next, std::vector<TreeLevel> tree);

  // Draft for `position` from its fresh p, by the method's tail update; for
  // maximal coupling `old` is the old draft coupled with p (may be null), exactly
  // whatever the method's relaxation. CPU distributions only: the device verifier
  // makes its tail drafts in its kernels.
  Draft update_tail(int64_t position, const at::Tensor& p, const Draft* old, uint32_t step) const;
  // Proactive drafting after a rejection: `k` candidates for each of the first
  // `depth` drafted positions, the current draft as candidate 0 (the next window's tree).
  void grow_tree(int k, int depth, uint32_t step);
  // grow_tree in two halves, so that a batch draws every sequence's candidates at once
  // (on a GPU one kernel and one read: decoder.cpp): plan_tree lays out the levels with
  // their first candidates and returns the draws of the rest, whose results (in that
  // order) add_tree_candidates takes.
  std::vector<sampling::CandidateDraw> plan_tree(int k, int depth, uint32_t step);
  void add_tree_candidates(const std::vector<std::vector<int64_t>>& drawn);

 private:
  // A new draft at `position`; `stale_draw` is the token drawn from stale_source(position) when it has one.
  Draft initialise(const std::vector<int64_t>& committed, int64_t position, uint32_t step, int64_t stale_draw) const;
  // The neighbour an initial draft copies or is drawn after (-1: none, or the random scheme).
  int64_t neighbour_of(int64_t position) const;
  // The remembered p an initial draft at `position` is drawn from (sample-left/up), or null.
  const at::Tensor* stale_source(int64_t position) const;
  sampling::RngKey init_key(int64_t position, uint32_t step) const;
  sampling::RngKey gumbel_key(int64_t position) const;  // scd-gs's noise of a position
  int64_t token_at(const std::vector<int64_t>& committed, int64_t position) const;
  sampling::RngKey key(uint32_t step, int64_t position, sampling::Purpose purpose) const;
  at::Tensor one_hot(int64_t token) const;

  const family::TokenLayout& layout_;
  const MethodConfig& method_;
  Mutants mutants_;
  uint64_t seed_;
  uint32_t sequence_;
  at::Device device_;
  int64_t first_ = 0;  // position of drafts_[0]
  std::deque<Draft> drafts_;
  std::vector<TreeLevel> tree_;
  std::vector<size_t> drawn_levels_;  // plan_tree's levels awaiting their candidates, in draw order
  // plan_fill's plan, until finish_fill.
  bool fill_planned_ = false;
  int64_t fill_count_ = 0;
  uint32_t fill_step_ = 0;
  size_t fill_draws_ = 0;
  std::map<int64_t, at::Tensor> stale_p_;
  at::Tensor uniform_image_q_;        // on device_: the q of a uniformly drawn initial token
  at::Tensor uniform_image_q_host_;   // the same values, drawn from on the CPU
};

}  // namespace sjd::decoding
