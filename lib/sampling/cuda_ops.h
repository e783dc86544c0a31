#pragma once
// at::Tensor front ends of the CUDA kernels in lib/kernels: the fused logits
// pipeline and the window verification, for tensors on a CUDA device. They
// mirror the CPU reference (logits_pipeline.h, rejection.h and
// decoding::WindowVerifier) on the same inputs and Philox streams. Only built
// when SJD_WITH_CUDA is on (cuda_ops.cpp compiles to nothing otherwise).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "io/step_upload.h"
#include "kernels/kernels.h"
#include "sampling/logits_pipeline.h"
#include "sampling/relaxation.h"
#include "sampling/window_verdict.h"

namespace sjd::sampling::cuda {

// The window's slot constraints as device tensors; build once, reuse while the
// window's positions keep the same constraints.
struct DeviceConstraints {
  at::Tensor forced;        // int64 [slots]: forced token or -1
  at::Tensor masks;         // uint8 [distinct masks, V] (undefined when no slot has a mask)
  at::Tensor mask_of_slot;  // int32 [slots]: row of `masks` or -1
};
// A mask's device copy is made once per host tensor (the layout's image mask): a mask's
// values must not change after it was first uploaded. The same holds for LANTERN's
// neighbour table in upload_relaxation.
DeviceConstraints upload_constraints(const std::vector<SlotConstraint>& constraints, int64_t vocab,
                                     at::Device device);
// The constraints from their parts: per slot the forced token (or -1) and the row of `masks` (or
// -1), the masks being uint8 [V] rows already on `device`. The two arrays go up in `upload` with
// whatever the caller added to it, which is sent here.
DeviceConstraints send_constraints(io::StepUpload& upload, const std::vector<int64_t>& forced,
                                   const std::vector<int32_t>& mask_of_slot, const std::vector<at::Tensor>& masks,
                                   at::Device device);

// run_logits_pipeline on the device: logits [rows, slots, V] (any float dtype,
// CUDA) -> probabilities [slots, V] float32 on the same device.
at::Tensor run_logits_pipeline(const at::Tensor& logits, const DeviceConstraints& constraints,
                               const PipelineSettings& settings);

// The same on a restricted head's columns (sampling::run_logits_pipeline's `columns`):
// the kernel over logits[..., columns] with the constraints in column terms, the
// probabilities put back into [slots, V] among zeros; a slot forced to a token outside
// the columns gets its point mass there. Undefined when the constraints need the whole
// width (a mask allowing none of the columns, a forced token past V) or the columns are
// not ascending ids below V: the caller runs the whole width.
at::Tensor run_logits_pipeline_on_columns(const at::Tensor& logits, const std::vector<SlotConstraint>& constraints,
                                          const PipelineSettings& settings, const std::vector<int64_t>& columns);

// Where the step's random streams and window sit.
struct StepKeys {
  uint64_t seed = 0;
  uint32_t sequence = 0;
  uint32_t step = 0;
  int64_t first_position = 0;
  int64_t total_length = 0;
};

// A relaxation with its per-position weights (positions 1..window) and LANTERN
// table on the device; the tensors own what `args` points to.
struct DeviceRelaxation {
  kernels::RelaxArgs args;
  at::Tensor weights;
  at::Tensor neighbours;
};
DeviceRelaxation upload_relaxation(const Relaxation& relax, int window, at::Device device);

// One draft distribution per spine position (each float32 [V] on the device).
struct ChainDrafts {
  std::vector<int64_t> tokens;
  std::vector<at::Tensor> q;
};

struct ChainVerdicts {
  at::Tensor accepted;    // uint8 [chain]
  at::Tensor mrs_token;   // int64 [chain]: the draft if accepted, else the residual draw
  at::Tensor tail_token;  // int64 [chain + 1]: the next draft of each spine slot (-1 past the end)
};
// MRS of every spine draft against probs[s] in parallel, plus the tail update.
ChainVerdicts verify_chain(const at::Tensor& probs, const ChainDrafts& drafts, kernels::TailDraw tail,
                           const StepKeys& keys, const DeviceRelaxation& relax);

// A kSample draw from every slot's p; slot i predicts position first + depth[i].
at::Tensor sample_slots(const at::Tensor& probs, const std::vector<int32_t>& depth, const StepKeys& keys);

// K candidates of one tree depth and the q they were drawn from (float32 [V], device).
struct TreeLevelInput {
  std::vector<int64_t> candidates;
  at::Tensor q;
};
struct TreeVerdicts {
  at::Tensor candidate;  // int32 [count]: accepted candidate index, -1 if none
  at::Tensor token;      // int64 [count]
  at::Tensor listed;     // int32 [count]: ids the level's block verified over in shared memory, -1: all of them
};
// verify_candidates of level depth[i] against probs[slot[i]], for all i at once.
TreeVerdicts verify_tree(const at::Tensor& probs, const std::vector<TreeLevelInput>& levels,
                         const std::vector<int32_t>& slot, const std::vector<int32_t>& depth, const StepKeys& keys,
                         const DeviceRelaxation& relax);

// draw_without_replacement(q without `exclude[i]`, want, key(step, position[i], kCandidates)) for
// every i, on the stream of keys[i]'s seed, sequence and step (one per q: a batch's sequences draw
// together); rows are padded with -1 where q runs out of mass. A row's first n candidates do not
// depend on `want` (the kernel takes them in order).
at::Tensor draw_candidates(const std::vector<at::Tensor>& q, const std::vector<int64_t>& position,
                           const std::vector<int64_t>& exclude, int want, const std::vector<StepKeys>& keys);

// sample_token from every q row (float32 [V], one device) on its stream: int64 [rows] on the
// device, queued; -1 where a row has no positive mass.
at::Tensor sample_rows(const std::vector<at::Tensor>& q, const std::vector<kernels::PhiloxStream>& streams);

// A whole window: drafts on the spine (nodes 0 .. chain-1), optional tree nodes
// after them, and the tree levels proactive drafting prepared.
struct WindowSpec {
  int chain = 0;
  std::vector<int64_t> node_tokens;          // every draft node
  std::vector<int> node_depth;               // depth >= 1 of each node
  std::vector<std::vector<int>> child_of;    // [slot][candidate] -> node (empty for a chain)
  ChainDrafts drafts;                        // the spine's drafts and their q
  std::vector<TreeLevelInput> levels;        // empty for a chain
  kernels::TailDraw tail = kernels::kTailResample;
};

// All kernels of one verification step, queued: the packed verdict stays on the device (int64
// [kernels::walk_packed_size(window.chain)]) for the caller to read (decoding reads every sequence's of
// a step in one copy) and unpack (unpack_window).
at::Tensor queue_window(const at::Tensor& probs, const WindowSpec& window, const StepKeys& keys,
                        const DeviceRelaxation& relax);
// The same with its own device-to-host read, unpacked.
WindowResult verify_window(const at::Tensor& probs, const WindowSpec& window, const StepKeys& keys,
                           const DeviceRelaxation& relax);

}  // namespace sjd::sampling::cuda
