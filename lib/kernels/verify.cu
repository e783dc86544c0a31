// Verification of the window's spine: one block per spine slot runs modified
// rejection sampling of that slot's draft (kAccept uniform; on rejection the
// residual drawn by the exponential race on the kResidual stream) and the
// slot's next draft by the method's tail update. All positions are verified at
// once; the walk (window_walk.cu) finds the first rejection afterwards.
#include <cuda_runtime.h>

#include "kernels/block_ops.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.cuh"

namespace sjd::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ PhiloxStream stream_of(const StepInfo& s, uint32_t step, int64_t position,
                                                  uint32_t purpose) {
  return {s.seed, s.sequence, step, static_cast<uint32_t>(position), purpose, 0u};
}

// verify_draft: the committed token at this slot (the draft, or the residual draw).
__device__ int64_t verify_one(const float* p, const float* q, int64_t n, int64_t draft, double weight,
                              const RelaxArgs& relax, const StepInfo& step, int64_t position, bool* accepted) {
  __shared__ bool accept;
  __shared__ DraftNeighbourhood own;
  if (threadIdx.x == 0) {
    const PhiloxStream key = stream_of(step, step.step, position, kPurposeAccept);
    accept = accept_draft(relaxed_score(relax, p, draft, weight), q[draft], philox_uniform(key, 0));
    own.draft = draft;
    own.count = 0;
    if (relax.kind == kRelaxLantern && relax.lantern_own_residual) {
      own.count = lantern_extras(relax, p, draft, own.extra, &own.mass);
    }
  }
  __syncthreads();
  *accepted = accept;
  if (accept) return draft;
  const PhiloxStream residual = stream_of(step, step.step, position, kPurposeResidual);
  const int64_t token = block_race(
      [&](int64_t v) { return residual_weight(relax, p, q[v], v, weight, own); }, n, residual);
  if (token >= 0) return token;
  // Rounding left the residual no mass (p == q up to float error): draw from p itself.
  return block_race([&](int64_t v) { return p[v]; }, n, residual);
}

__global__ void verify_chain_kernel(ChainArgs a) {
  const int s = blockIdx.x;  // spine slot 0..chain
  const int64_t n = a.vocab;
  const int64_t position = a.step.first_position + s;
  const float* p = a.probs + static_cast<int64_t>(s) * n;
  int64_t coupled = -1;
  if (s < a.chain) {
    const double weight = a.relax.weights != nullptr ? a.relax.weights[s] : 1.0;
    bool accepted = false;
    const int64_t token = verify_one(p, a.draft_q[s], n, a.draft_tokens[s], weight, a.relax, a.step, position,
                                     &accepted);
    if (threadIdx.x == 0) {
      a.accepted[s] = accepted ? 1 : 0;
      a.mrs_token[s] = token;
    }
    coupled = token;
  }
  if (position >= a.step.total_length) {
    if (threadIdx.x == 0) a.tail_token[s] = -1;
    return;
  }
  int64_t next;
  if (a.tail == kTailGreedy) {
    next = block_argmax(p, n);
    if (!(p[next] > 0.0f)) next = -1;  // no positive probability: refused by the host, as sampling::argmax does
  } else if (a.tail == kTailGumbelShared) {  // the same noise at every step: keyed with step 0
    next = block_race([&](int64_t v) { return p[v]; }, n, stream_of(a.step, 0u, position, kPurposeGumbel));
  } else if (a.tail == kTailMaximalCoupling && s < a.chain) {
    // The MRS output of the old draft against the new p, always the exact coupling (its law is p, the q the next
    // verification takes): under a relaxation it is drawn again without one, from the same uniforms, which served
    // a verification whose outcome at this slot is not committed.
    if (a.relax.kind == kRelaxNone) {
      next = coupled;
    } else {
      __syncthreads();  // every thread has read verify_one's shared verdict before it is reused
      bool accepted = false;
      next = verify_one(p, a.draft_q[s], n, a.draft_tokens[s], 1.0, RelaxArgs{}, a.step, position, &accepted);
    }
  } else {
    next = block_race([&](int64_t v) { return p[v]; }, n, stream_of(a.step, a.step.step, position, kPurposeJacobi));
  }
  if (threadIdx.x == 0) a.tail_token[s] = next;
}

__global__ void sample_slots_kernel(SampleArgs a) {
  const int slot = blockIdx.x;
  const int64_t position = a.step.first_position + a.depth[slot];
  if (position >= a.step.total_length) {
    if (threadIdx.x == 0) a.token[slot] = -1;
    return;
  }
  const float* p = a.probs + static_cast<int64_t>(slot) * a.vocab;
  const int64_t token = block_race([&](int64_t v) { return p[v]; }, a.vocab,
                                   stream_of(a.step, a.step.step, position, kPurposeSample));
  if (threadIdx.x == 0) a.token[slot] = token;
}

__global__ void sample_rows_kernel(RowSampleArgs a) {
  const int i = blockIdx.x;
  const float* q = a.q[i];
  const int64_t token = block_race([&](int64_t v) { return q[v]; }, a.vocab, a.streams[i]);
  if (threadIdx.x == 0) a.token[i] = token;
}

}  // namespace

void launch_verify_chain(const ChainArgs& args, StreamHandle stream) {
  verify_chain_kernel<<<args.chain + 1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("verify_chain_kernel");
}

void launch_sample_slots(const SampleArgs& args, StreamHandle stream) {
  if (args.slots <= 0) return;
  sample_slots_kernel<<<args.slots, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("sample_slots_kernel");
}

void launch_sample_rows(const RowSampleArgs& args, StreamHandle stream) {
  if (args.count <= 0) return;
  sample_rows_kernel<<<args.count, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("sample_rows_kernel");
}

}  // namespace sjd::kernels
