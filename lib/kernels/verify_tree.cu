// SJD-PAC's tree levels on the device.
//  - verify_tree_kernel: recursive rejection sampling of one level's K
//    candidates (drawn without replacement from q) against one slot's p; one
//    block per (slot, level) pair, candidates in order, the vocabulary in
//    parallel. Candidate k is tested against the running residual target p^(k)
//    with q^(k) = q without the earlier candidates, renormalised.
//  - draw_candidates_kernel: the candidates themselves, by Gumbel-top-k.
#include <cuda_runtime.h>

#include "kernels/block_ops.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.cuh"

namespace sjd::kernels {
namespace {

constexpr int kThreads = 256;
// A tree block's passes over the vocabulary wait on memory, not arithmetic (an H200 trace: 932 us for
// 21 blocks of 256 threads at Lumina's 65536 ids): more threads per block make each thread's chain of
// loads shorter, and every loop below issues its loads before its stores.
constexpr int kTreeThreads = 512;

__global__ void __launch_bounds__(kTreeThreads) verify_tree_kernel(TreeArgs a) {
  const int i = blockIdx.x;
  const int64_t n = a.vocab;
  const int depth = a.depth[i];
  const float* p = a.probs + static_cast<int64_t>(a.slot[i]) * n;
  const float* q = a.level_q[depth];
  const int64_t* candidates = a.candidates + static_cast<int64_t>(depth) * a.max_candidates;
  const int count = a.candidate_count[depth];
  const int64_t position = a.step.first_position + depth;
  const double weight = a.relax.weights != nullptr ? a.relax.weights[depth] : 1.0;
  float* __restrict__ target = a.scratch + static_cast<int64_t>(i) * 3 * n;  // p^(k)
  float* __restrict__ draft_q = target + n;                                  // q with earlier candidates removed
  float* __restrict__ residual = draft_q + n;

  __shared__ double q_remaining;
  __shared__ bool accepted, exhausted;
  __shared__ DraftNeighbourhood own;
  double local_q = 0.0;
#pragma unroll 4
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    const float pv = p[v], qv = q[v];
    target[v] = pv;
    draft_q[v] = qv;
    local_q += qv;
  }
  // q's mass, and below what it has left after each candidate, summed from the row: a float row sums to 1 only
  // within ~1e-6, an error that 1 minus the tried candidates' q would divide by the little mass left
  // (sampling::verify_candidates).
  const double q_mass = block_sum(local_q);
  if (threadIdx.x == 0) {
    q_remaining = q_mass;
    own.count = 0;
  }
  __syncthreads();

  for (int k = 0; k < count; ++k) {
    const int64_t c = candidates[k];
    if (threadIdx.x == 0) {
      const PhiloxStream key{a.step.seed, a.step.sequence, a.step.step, static_cast<uint32_t>(position),
                             kPurposeAccept, static_cast<uint32_t>(k)};
      const float qk_c = static_cast<float>(draft_q[c] / q_remaining);
      accepted = accept_draft(relaxed_score(a.relax, target, c, weight), qk_c, philox_uniform(key, 0));
      own.draft = c;
      if (!accepted && a.relax.kind == kRelaxLantern && a.relax.lantern_own_residual) {
        own.count = lantern_extras(a.relax, target, c, own.extra, &own.mass);
      }
    }
    __syncthreads();
    if (accepted) {
      if (threadIdx.x == 0) {
        a.accepted_candidate[i] = k;
        a.token[i] = c;
      }
      return;
    }
    const double remaining = q_remaining;
    double local_mass = 0.0, local_rest = 0.0;
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
      const float dq = draft_q[v];
      // 0 / remaining is +0 exactly (remaining > 0): the double division only where q has mass.
      const float qk = dq == 0.0f ? 0.0f : static_cast<float>(dq / remaining);
      const float r = residual_weight(a.relax, target, qk, v, weight, own);
      residual[v] = r;
      local_mass += r;
      if (v != c) local_rest += dq;
    }
    const double rest = block_sum(local_rest);
    const double mass = block_sum(local_mass);  // also orders the residual writes before the rewrite below
    if (mass > 0.0) {
      const double scale = 1.0 / mass;
#pragma unroll 4
      for (int64_t v = threadIdx.x; v < n; v += blockDim.x) target[v] = static_cast<float>(residual[v] * scale);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      q_remaining = rest;
      draft_q[c] = 0.0f;
      exhausted = !(rest > 0.0);  // q has no further candidate
    }
    __syncthreads();
    if (exhausted) break;
  }
  // Every candidate failed: draw from the last residual target (or p, if it has no mass).
  const PhiloxStream key{a.step.seed, a.step.sequence, a.step.step, static_cast<uint32_t>(position),
                         kPurposeResidual, static_cast<uint32_t>(count)};
  int64_t token = block_race([&](int64_t v) { return target[v]; }, n, key);
  if (token < 0) token = block_race([&](int64_t v) { return p[v]; }, n, key);
  if (threadIdx.x == 0) {
    a.accepted_candidate[i] = -1;
    a.token[i] = token;
  }
}

__global__ void draw_candidates_kernel(CandidateArgs a) {
  const int i = blockIdx.x;
  const float* q = a.q[i];
  const int64_t exclude = a.exclude[i];
  const StepInfo& step = a.steps[i];
  const PhiloxStream key{step.seed, step.sequence, step.step, static_cast<uint32_t>(a.position[i]), kPurposeCandidates,
                         0u};
  __shared__ int64_t chosen[kMaxCandidates];
  int64_t* out = a.out + static_cast<int64_t>(i) * a.want;
  for (int r = 0; r < a.want; ++r) {
    // The next of the Gumbel-top-k order: the best q/E among tokens not yet taken.
    const int64_t next = block_race(
        [&](int64_t v) {
          if (v == exclude) return 0.0f;
          for (int j = 0; j < r; ++j) {
            if (chosen[j] == v) return 0.0f;
          }
          return q[v];
        },
        a.vocab, key);
    if (threadIdx.x == 0) {
      chosen[r] = next;
      out[r] = next;
    }
    __syncthreads();
    if (next < 0) {  // no positive mass left: pad
      for (int j = r + 1 + static_cast<int>(threadIdx.x); j < a.want; j += blockDim.x) out[j] = -1;
      return;
    }
  }
}

}  // namespace

void launch_verify_tree(const TreeArgs& args, StreamHandle stream) {
  if (args.count <= 0) return;
  verify_tree_kernel<<<args.count, kTreeThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("verify_tree_kernel");
}

void launch_draw_candidates(const CandidateArgs& args, StreamHandle stream) {
  if (args.count <= 0 || args.want <= 0) return;
  if (args.want > kMaxCandidates) throw std::runtime_error("draw_candidates: more than 16 candidates per position");
  draw_candidates_kernel<<<args.count, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("draw_candidates_kernel");
}

}  // namespace sjd::kernels
