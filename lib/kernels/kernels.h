#pragma once
// Launchers of the CUDA kernels, over raw device pointers. Plain C++: no CUDA
// or ATen header is needed to include it, so the .cu files build with plain
// nvcc and the at::Tensor wrappers (sampling/cuda_ops.h) stay in ordinary C++.
// Every launcher enqueues on `stream` (a cudaStream_t) and returns without
// synchronising; launch errors are thrown as std::runtime_error naming the kernel.
#include <cstdint>

#include "kernels/philox.cuh"
#include "kernels/verify_math.cuh"

namespace sjd::kernels {

using StreamHandle = void*;  // cudaStream_t

// ---- logits pipeline (logits_pipeline.cu) -------------------------------------
// For every slot at once: CFG mix (on logits or on log-probs) -> forced token
// or allowed mask -> temperature (<= 0: greedy point mass) -> top-k by radix
// selection -> softmax. Same semantics as sampling::run_logits_pipeline.
struct PipelineArgs {
  const float* logits = nullptr;         // [rows, slots, vocab]; row 0 conditional, row 1 unconditional
  int rows = 1;
  int slots = 0;
  int64_t vocab = 0;
  const int64_t* forced = nullptr;       // [slots]: forced token or -1
  const uint8_t* masks = nullptr;        // [mask_count, vocab]: 1 = allowed (may be null)
  const int32_t* mask_of_slot = nullptr; // [slots]: row of `masks`, or -1 for every token allowed
  float cfg_scale = 1.0f;                // used when rows == 2 and != 1
  bool cfg_on_log_probs = false;
  float temperature = 1.0f;
  int64_t top_k = 0;                     // 0 or >= vocab: no top-k
  float* probs = nullptr;                // out [slots, vocab]
};
void launch_logits_pipeline(const PipelineArgs& args, StreamHandle stream);

// ---- window verification (verify.cu, verify_tree.cu, window_walk.cu) ----------
// The step's random-stream address and where the window sits.
struct StepInfo {
  uint64_t seed = 0;
  uint32_t sequence = 0;
  uint32_t step = 0;
  int64_t first_position = 0;  // generated index predicted by slot 0
  int64_t total_length = 0;    // generated tokens in the layout
};
// Copied to the device as raw bytes (draw_candidates' per-row keys): one layout for the host compiler and nvcc.
static_assert(sizeof(StepInfo) == 32 && alignof(StepInfo) == 8, "StepInfo crosses to the device as bytes");

// How a drafted position whose p was just computed becomes its next draft
// (decoding::TailUpdate).
enum TailDraw : int { kTailResample = 0, kTailGreedy = 1, kTailGumbelShared = 2, kTailMaximalCoupling = 3 };

// MRS of every spine draft in parallel, and every spine slot's next draft.
// Slot s (0..chain) is row s of `probs`; draft s sits at position first + s and
// is verified against probs[s] (decoding::WindowVerifier's chain walk).
struct ChainArgs {
  const float* probs = nullptr;             // [>= chain + 1, vocab]
  int64_t vocab = 0;
  int chain = 0;
  const int64_t* draft_tokens = nullptr;    // [chain]
  const float* const* draft_q = nullptr;    // [chain] device pointers to q rows of `vocab` floats
  int tail = kTailResample;
  StepInfo step;
  RelaxArgs relax;
  uint8_t* accepted = nullptr;              // out [chain]
  int64_t* mrs_token = nullptr;             // out [chain]: the draft if accepted, else the residual draw
  int64_t* tail_token = nullptr;            // out [chain + 1]: next draft of position first + s (-1 past the end)
};
void launch_verify_chain(const ChainArgs& args, StreamHandle stream);

// A kSample draw (the bonus token) from every slot's p; slot i predicts
// position first + depth[i]. -1 for positions past the layout.
struct SampleArgs {
  const float* probs = nullptr;    // [slots, vocab]
  int64_t vocab = 0;
  int slots = 0;
  const int32_t* depth = nullptr;  // [slots]
  StepInfo step;
  int64_t* token = nullptr;        // out [slots]
};
void launch_sample_slots(const SampleArgs& args, StreamHandle stream);

// One exponential-race draw from each of `count` distributions, each on a stream
// of its own (sampling::sample_token): the initial drafts drawn from a stale p
// (--init sample-left/up), every sequence's of a step in one launch. -1 where a
// distribution has no positive mass.
struct RowSampleArgs {
  const float* const* q = nullptr;        // [count] device pointers to rows of `vocab` floats
  int64_t vocab = 0;
  int count = 0;
  const PhiloxStream* streams = nullptr;  // [count]
  int64_t* token = nullptr;               // out [count]
};
// Copied to the device as raw bytes: one layout for the host compiler and nvcc.
static_assert(sizeof(PhiloxStream) == 32 && alignof(PhiloxStream) == 8, "PhiloxStream crosses to the device as bytes");
void launch_sample_rows(const RowSampleArgs& args, StreamHandle stream);

// Recursive multi-candidate verification (SJD-PAC) of one tree level for
// several slots in parallel: slot i verifies level depth[i]'s candidates
// against probs[slot[i]] (sampling::verify_candidates). A block whose p and q
// have mass on few ids (top-k) lists them in shared memory and verifies over the
// list; the others, and LANTERN's relaxation (it reads neighbours' p), go over
// the whole vocabulary in `scratch`.
struct TreeArgs {
  const float* probs = nullptr;           // [slots, vocab]
  int64_t vocab = 0;
  int count = 0;                          // (slot, depth) pairs to verify
  const int32_t* slot = nullptr;          // [count]
  const int32_t* depth = nullptr;         // [count]
  const float* const* level_q = nullptr;  // [levels] device pointers to each level's q
  const int64_t* candidates = nullptr;    // [levels, max_candidates]
  const int32_t* candidate_count = nullptr;  // [levels]
  int max_candidates = 0;
  StepInfo step;
  RelaxArgs relax;
  float* scratch = nullptr;               // [count, 3, vocab]: running target, draft q, residual
  bool list_support = true;               // false (SJD_SPARSE_TREE_VERIFY=0): every block takes the whole vocabulary
  int32_t* accepted_candidate = nullptr;  // out [count]: index of the accepted candidate, -1 if none
  int64_t* token = nullptr;               // out [count]: the committed token
  int32_t* listed = nullptr;              // out [count]: how many ids the block listed, -1: the whole vocabulary
};
void launch_verify_tree(const TreeArgs& args, StreamHandle stream);

// Proactive drafting: for each of `count` positions, up to want[i] distinct
// tokens drawn without replacement from q without token exclude[i] (Gumbel-top-k,
// kCandidates stream; sampling::draw_without_replacement). Fewer come back
// (padded with -1) when q has fewer tokens of positive mass.
struct CandidateArgs {
  const float* const* q = nullptr;  // [count] device pointers
  int64_t vocab = 0;
  int count = 0;
  const int64_t* position = nullptr;  // [count]
  const int64_t* exclude = nullptr;   // [count]
  int want = 0;                       // at most kMaxCandidates
  const StepInfo* steps = nullptr;    // [count]: each draw's seed, sequence and step (a batch's sequences differ)
  int64_t* out = nullptr;             // out [count, want]
};
constexpr int kMaxCandidates = 16;
void launch_draw_candidates(const CandidateArgs& args, StreamHandle stream);

// The verification walk of decoding::WindowVerifier::verify over the results
// above, on the device, packed into one small buffer the host reads once:
//   [0] committed tokens n   [1] path length m   [2] rejected (0/1)
//   [3] sibling accepts      [4] next drafts d
//   from walk_tokens_offset: tokens[n] (room for chain + 1)
//   from walk_path_offset:   path[m], node indices (room for chain)
//   from walk_next_offset:   next draft tokens[d], for positions first + n on (room for chain + 1)
struct WalkArgs {
  int chain = 0;
  int levels = 0;                         // tree levels (0: a plain chain)
  const int32_t* level_size = nullptr;    // [levels] candidates per level
  const int64_t* node_token = nullptr;    // [nodes]
  const int32_t* child_of = nullptr;      // [chain + 1 + nodes, max_candidates]: node of candidate k under a slot, -1
  int max_candidates = 0;
  const int32_t* tree_index_of_slot = nullptr;  // [slots]: row of the tree results verifying that slot, -1
  const int32_t* tree_candidate = nullptr;      // TreeArgs::accepted_candidate
  const int64_t* tree_token = nullptr;          // TreeArgs::token
  const uint8_t* accepted = nullptr;      // ChainArgs outputs
  const int64_t* mrs_token = nullptr;
  const int64_t* tail_token = nullptr;
  const int64_t* sample_token = nullptr;  // SampleArgs::token, per slot
  StepInfo step;
  int64_t* packed = nullptr;              // out [walk_packed_size(chain)]
};
SJD_HOST_DEVICE int64_t walk_tokens_offset(int) { return 5; }
SJD_HOST_DEVICE int64_t walk_path_offset(int chain) { return 5 + (chain + 1); }
SJD_HOST_DEVICE int64_t walk_next_offset(int chain) { return walk_path_offset(chain) + chain; }
SJD_HOST_DEVICE int64_t walk_packed_size(int chain) { return walk_next_offset(chain) + chain + 1; }
void launch_window_walk(const WalkArgs& args, StreamHandle stream);

}  // namespace sjd::kernels
