#pragma once
// Verification of one window on a CUDA device, for a sequence whose draft book
// lives there: every draft's q, the stale p's and this step's probabilities stay
// on the device, the kernels of sampling/cuda_ops.h make WindowVerifier's
// decisions on the same Philox streams (tests/cuda holds them to it), and one
// small packed read per step (one for the whole batch: decoder.cpp) brings back
// what was committed and the next drafts' tokens. The draft book is then updated
// as WindowVerifier::verify updates it.
// A build without CUDA has the class, and refuses to verify with it.
#include <map>

#include "decoding/draft_book.h"
#include "decoding/method.h"
#include "decoding/window_planner.h"
#include "decoding/window_verifier.h"
#include "sampling/cuda_ops.h"

namespace sjd::decoding {

// The book and the outcome as WindowVerifier::verify leaves them, from what the
// kernels committed (`result`): each committed position remembers the p of its
// slot on the accepted path, and every later spine slot's p becomes the q of its
// position's next draft (every tail update draws from the fresh p; the kernels
// drew the tokens). Works on any device; a CPU test holds it to WindowVerifier.
WindowOutcome adopt_window_result(const WindowInput& in, const sampling::cuda::WindowResult& result,
                                  DraftBook& book);

// Whether the kernels take this method's windows: at most kernels::kMaxCandidates
// candidates after the first per tree level, at most kernels::kMaxLanternNeighbours
// LANTERN neighbours. A method beyond them is verified on the CPU.
bool device_kernels_take(const MethodConfig& method);

class DeviceVerifier {
 public:
  DeviceVerifier(const MethodConfig& method, uint64_t seed, uint32_t sequence)
      : method_(method), seed_(seed), sequence_(sequence) {}

  // The window's verification queued on the device (AR: the root slot's sample; speculative: every
  // kernel of sampling::cuda::queue_window): its packed verdict, int64 on the device. The caller
  // reads it -- the decoding loop with every sequence's of the step, in one copy -- and hands it to
  // `adopt`. The book must not change in between.
  at::Tensor queue(const WindowInput& in, const DraftBook& book);
  // The outcome from the verdict read to the host; a speculative window also hands the next drafts
  // (their q: rows of in.probs) to `book`.
  WindowOutcome adopt(const WindowInput& in, const at::Tensor& verdict, DraftBook& book) const;
  // Both, with a read of their own (the bench's timed phases).
  WindowOutcome verify(const WindowInput& in, DraftBook& book);

 private:
  sampling::cuda::StepKeys keys(const WindowInput& in) const;
  // The relaxation's per-position weights for a chain of this length, uploaded once.
  const sampling::cuda::DeviceRelaxation& relaxation(int chain, at::Device device);

  const MethodConfig& method_;
  uint64_t seed_;
  uint32_t sequence_;
  std::map<int, sampling::cuda::DeviceRelaxation> relaxations_;
};

}  // namespace sjd::decoding
