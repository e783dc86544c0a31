#pragma once
// One sequence's side of the generation loop: its drafts, window planner,
// verifier, random streams and committed tokens. Each step it lays out a window
// (next_window), the caller runs the model over it -- alone or batched with
// other sequences' windows -- and the logits pipeline, hands the probabilities
// back (verify_window), and then the verdict (finish_window), which commits. A
// sequence's tokens depend only on its own request and logits, never on what
// shares its batch.
// It verifies where its draft book lives: on the CPU (WindowVerifier), or on
// the GPU that computed its probabilities (DeviceVerifier).
#include <cstdint>
#include <vector>

#include "decoding/decoder.h"
#include "decoding/device_verifier.h"
#include "decoding/draft_book.h"
#include "decoding/step_timer.h"
#include "decoding/window_planner.h"
#include "decoding/window_verifier.h"

namespace sjd::decoding {

class SequenceDecoder {
 public:
  // Holds references into itself (the planner, book and verifier read request_.method): not movable.
  // `verify_on`: the device of the draft book and the verification (the CPU, or the model's GPU).
  SequenceDecoder(const family::TokenLayout& layout, DecodeRequest request, const Mutants& mutants,
                  at::Device verify_on = at::kCPU);
  SequenceDecoder(const SequenceDecoder&) = delete;
  SequenceDecoder& operator=(const SequenceDecoder&) = delete;

  const DecodeRequest& request() const { return request_; }
  int64_t rows() const { return static_cast<int64_t>(request_.rows.size()); }
  bool finished() const { return static_cast<int64_t>(result_.tokens.size()) >= total_; }
  // Draft nodes the model may be asked for at most in one window (sizes the KV cache).
  int largest_window() const { return window_nodes(decoding::largest_window(request_.method)); }

  // Lays out the next window in two halves, so that a batch draws every sequence's initial
  // drafts from a stale p at once (sample-left/up; on a GPU one kernel and one read:
  // decoder.cpp): plan_window returns those draws (often none), and next_window takes
  // their tokens in the same order and lays out the draft nodes after each row's root (the
  // rows share them).
  std::vector<sampling::RowDraw> plan_window();
  const model::DraftTree& next_window(const std::vector<int64_t>& drawn);
  int64_t root(int64_t row) const { return roots_[static_cast<size_t>(row)]; }
  // Whether verify_window only queues the verification (its draft book is on a GPU).
  bool verifies_on_device() const { return !book_.device().is_cpu(); }
  // The logits pipeline's constraint of each slot of the window (root first).
  std::vector<sampling::SlotConstraint> slot_constraints() const;
  // Verifies the window with its probabilities [1 + nodes, V] (the logits
  // pipeline's output, on any device: copied to the CPU when verified there).
  // On a GPU the verification is only queued: the returned device tensor is
  // its packed verdict, for the caller to read to the host -- every sequence's
  // of the step in one copy (io::read_together) -- and hand to finish_window.
  // The CPU verifies at once and returns an undefined tensor.
  at::Tensor verify_window(const at::Tensor& probs);
  // Commits what the verification accepted (`verdict`: verify_window's tensor
  // on the host; undefined after the CPU's) and plans the next window; returns
  // the accepted draft nodes (root to leaf) the model keeps.
  const std::vector<int>& finish_window(const at::Tensor& verdict);
  // After finish_window: the candidate draws of the next window's tree (SJD-PAC after a
  // rejection; often none), which the caller makes -- every sequence's at once, so that a
  // GPU reads them in one copy -- and hands back in the same order to grow_tree.
  const std::vector<sampling::CandidateDraw>& tree_draws() const { return tree_draws_; }
  void grow_tree(const std::vector<std::vector<int64_t>>& drawn) {
    book_.add_tree_candidates(drawn);
    tree_draws_.clear();  // their q's live on in the book's tree
  }
  // This sequence's share of the step's time (StepTimer). `host_timed`: the step ran on the CPU,
  // where verify_window's own host time is the verification's, not `share.verify`.
  void charge_step(const StepSeconds& share, bool host_timed);

  void add_prefill_seconds(double seconds) { result_.stats.prefill_seconds += seconds; }
  DecodeResult take_result();

 private:
  const family::TokenLayout& layout_;
  const DecodeRequest request_;
  const Mutants mutants_;
  const int64_t total_;
  WindowPlanner planner_;
  DraftBook book_;
  const WindowVerifier verifier_;
  DeviceVerifier device_verifier_;
  DecodeResult result_;
  double verify_seconds_ = 0.0;  // the last CPU verification's, on the host
  WindowInput input_{};          // the window being verified, from verify_window to finish_window
  std::vector<int64_t> roots_;
  model::DraftTree nodes_;
  std::vector<std::vector<int>> child_of_;
  WindowShape shape_;
  int planned_chain_ = 0;  // plan_window's spine length, for next_window
  WindowReport report_;
  WindowOutcome outcome_;
  std::vector<sampling::CandidateDraw> tree_draws_;  // the next tree's, from finish_window to grow_tree
  uint32_t step_ = 0;
};

}  // namespace sjd::decoding
