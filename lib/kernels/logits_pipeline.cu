// The fused logits pipeline: one block per window slot does CFG mix,
// constraint, temperature, top-k and softmax over the whole vocabulary, the
// probabilities row doubling as scratch between passes. Top-k finds the k-th
// largest value by a 4-pass radix select over order-preserving integer keys
// (8 bits per pass, a 256-bin shared histogram), never sorting.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/block_ops.cuh"
#include "kernels/kernels.h"
#include "kernels/launch_check.cuh"
#include "kernels/radix_select.cuh"

namespace sjd::kernels {
namespace {

constexpr int kThreads = 1024;

// log(sum(exp(x))) of a row, for the log-prob CFG mix.
__device__ float block_logsumexp(const float* x, int64_t n) {
  float local_max = -INFINITY;
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) local_max = fmaxf(local_max, x[v]);
  const float row_max = block_max(local_max, -INFINITY);
  float local_sum = 0.0f;
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) local_sum += expf(x[v] - row_max);
  return row_max + logf(block_sum(local_sum));
}

// The k-th largest value of x[0..n) (k >= 1), exactly, by radix selection.
__device__ float block_kth_largest(const float* x, int64_t n, int64_t k) {
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t prefix, prefix_mask;
  __shared__ int64_t remaining;
  if (threadIdx.x == 0) {
    prefix = 0;
    prefix_mask = 0;
    remaining = k;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) histogram[b] = 0;
    __syncthreads();
    const uint32_t want = prefix, mask = prefix_mask;
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
      const uint32_t key = order_key(x[v]);
      if ((key & mask) == want) atomicAdd(&histogram[(key >> shift) & 0xFFu], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // the digit holding the k-th largest, scanning from the top
      int64_t rank = remaining;
      const int digit = select_digit(histogram, &rank);
      remaining = rank;
      prefix |= static_cast<uint32_t>(digit) << shift;
      prefix_mask |= 0xFFu << shift;
    }
    __syncthreads();
  }
  return from_order_key(prefix);
}

__global__ void logits_pipeline_kernel(PipelineArgs a) {
  const int slot = blockIdx.x;
  const int64_t n = a.vocab;
  float* out = a.probs + static_cast<int64_t>(slot) * n;
  const int64_t forced = a.forced != nullptr ? a.forced[slot] : -1;
  if (forced >= 0) {  // a point mass on the forced token
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) out[v] = v == forced ? 1.0f : 0.0f;
    return;
  }
  const float* cond = a.logits + static_cast<int64_t>(slot) * n;
  const float* uncond = cond + static_cast<int64_t>(a.slots) * n;
  const bool mix = a.rows >= 2 && a.cfg_scale != 1.0f;
  float cond_lse = 0.0f, uncond_lse = 0.0f;
  if (mix && a.cfg_on_log_probs) {
    cond_lse = block_logsumexp(cond, n);
    uncond_lse = block_logsumexp(uncond, n);
  }
  const int32_t mask_row = a.mask_of_slot != nullptr ? a.mask_of_slot[slot] : -1;
  const uint8_t* allowed =
      (a.masks != nullptr && mask_row >= 0) ? a.masks + static_cast<int64_t>(mask_row) * n : nullptr;
  const bool greedy = a.temperature <= 0.0f;

  // Pass 1: mixed, masked, tempered logits into `out`.
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    float x = cond[v];
    if (mix) {
      if (a.cfg_on_log_probs) {
        const float lc = cond[v] - cond_lse, lu = uncond[v] - uncond_lse;
        x = lu + a.cfg_scale * (lc - lu);
      } else {
        x = uncond[v] + a.cfg_scale * (cond[v] - uncond[v]);
      }
    }
    if (allowed != nullptr && allowed[v] == 0) x = -INFINITY;
    if (!greedy && a.temperature != 1.0f) x = x / a.temperature;
    out[v] = x;
  }
  __syncthreads();

  if (greedy) {  // temperature 0: a point mass on the argmax (lowest index among ties)
    // As on the CPU, a row whose largest logit is not finite (a NaN anywhere, +inf, every token masked) gets
    // no mass, so its draw fails; block_argmax alone would skip a NaN where ATen's argmax takes it.
    float local_bad = 0.0f;
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
      if (isnan(out[v]) || out[v] == INFINITY) local_bad = 1.0f;
    }
    const bool bad = block_max(local_bad, 0.0f) > 0.0f;
    const int64_t best = block_argmax(out, n);
    const bool point_mass = !bad && out[best] > -INFINITY;
    __syncthreads();  // every thread has read out[best] before the row is overwritten
    for (int64_t v = threadIdx.x; v < n; v += blockDim.x) out[v] = point_mass && v == best ? 1.0f : 0.0f;
    return;
  }
  float threshold = -INFINITY;  // values below it are cut (ties with the k-th value stay, as in the reference)
  if (a.top_k > 0 && a.top_k < n) threshold = block_kth_largest(out, n, a.top_k);

  float local_max = -INFINITY;
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    if (out[v] >= threshold) local_max = fmaxf(local_max, out[v]);
  }
  const float row_max = block_max(local_max, -INFINITY);
  float local_sum = 0.0f;
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    if (out[v] >= threshold) local_sum += expf(out[v] - row_max);
  }
  const float total = block_sum(local_sum);
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    out[v] = out[v] >= threshold ? expf(out[v] - row_max) / total : 0.0f;
  }
}

}  // namespace

void launch_logits_pipeline(const PipelineArgs& args, StreamHandle stream) {
  if (args.slots <= 0) return;
  logits_pipeline_kernel<<<args.slots, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  check_launch("logits_pipeline_kernel");
}

}  // namespace sjd::kernels
