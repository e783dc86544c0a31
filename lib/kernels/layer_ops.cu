// The transformer layer's fused elementwise kernels (layer_kernels.h). At decode
// shapes they move a few megabytes, so their time is latency, not bandwidth: each
// thread issues all of its loads before it waits on any (values held in
// registers, no store between them), a norm's row is spread over up to 1024
// threads, a head is one warp (no block-wide barrier), and no per-element integer
// division. Arithmetic is in float32, rounding to the element type exactly where
// the ATen ops they replace round. Measured on an H200 before this layout (one
// 256-thread block per token re-reading its row; one 128-thread block per head):
// Lumina 7B's RMS norms 14 us each at 2 and at 130 rows, 0.9 ms of a 6.1 ms AR step.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/block_ops.cuh"
#include "kernels/element_types.cuh"
#include "kernels/launch_check.cuh"
#include "kernels/layer_kernels.h"

namespace sjd::kernels {
namespace {

constexpr int kNormMaxThreads = 1024;
constexpr int kNormPerThread = 8;     // a row's elements a thread holds in registers (hidden <= 8192 in one go)
constexpr int kHeadWarps = 4;         // (cell, head) pairs per qkv-prologue block, one warp each
constexpr int kSiluThreads = 256;
constexpr int kSiluPerThread = 4;     // elements of one token's row per thread

template <typename T>
__global__ void __launch_bounds__(kNormMaxThreads) add_rms_norm_kernel(AddRmsNormArgs a) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * a.hidden;
  const T* __restrict__ x = static_cast<const T*>(a.x) + base;
  const T* __restrict__ delta = a.delta != nullptr ? static_cast<const T*>(a.delta) + base : nullptr;
  const T* __restrict__ weight = static_cast<const T*>(a.weight);
  T* __restrict__ sum = a.sum != nullptr ? static_cast<T*>(a.sum) + base : nullptr;
  T* __restrict__ normed = static_cast<T*>(a.normed) + base;
  const int64_t hidden = a.hidden, stride = blockDim.x;
  // The residual sum is what the next layer adds to, so it is rounded before it is squared,
  // as `x + delta` followed by a norm of its result would be.
  const auto value = [&](int64_t i) {
    return delta != nullptr ? rounded<T>(to_float(x[i]) + to_float(delta[i])) : to_float(x[i]);
  };
  float held[kNormPerThread];
#pragma unroll
  for (int k = 0; k < kNormPerThread; ++k) {
    const int64_t i = threadIdx.x + k * stride;
    held[k] = i < hidden ? value(i) : 0.0f;
  }
  float squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormPerThread; ++k) {
    const int64_t i = threadIdx.x + k * stride;
    if (i < hidden && sum != nullptr) sum[i] = from_float<T>(held[k]);
    squares += held[k] * held[k];
  }
  // A row longer than the registers hold (over kNormPerThread x 1024 elements) reads its tail twice.
  for (int64_t i = threadIdx.x + kNormPerThread * stride; i < hidden; i += stride) {
    const float s = value(i);
    if (sum != nullptr) sum[i] = from_float<T>(s);
    squares += s * s;
  }
  const float rstd = rsqrtf(block_sum(squares) / static_cast<float>(hidden) + a.eps);
#pragma unroll
  for (int k = 0; k < kNormPerThread; ++k) {
    const int64_t i = threadIdx.x + k * stride;
    if (i < hidden) normed[i] = from_float<T>(held[k] * rstd * to_float(weight[i]));
  }
  for (int64_t i = threadIdx.x + kNormPerThread * stride; i < hidden; i += stride) {
    normed[i] = from_float<T>(value(i) * rstd * to_float(weight[i]));
  }
}

// Block (t, c) covers the c-th run of kSiluThreads x kSiluPerThread elements of token t's row.
template <typename T>
__global__ void silu_mul_kernel(SiluMulArgs a) {
  const int64_t t = blockIdx.x, inner = a.inner;
  const T* __restrict__ gate = static_cast<const T*>(a.gate_up) + t * 2 * inner;
  const T* __restrict__ up = gate + inner;
  T* __restrict__ out = static_cast<T*>(a.out) + t * inner;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kSiluThreads * kSiluPerThread + threadIdx.x;
  float g[kSiluPerThread], u[kSiluPerThread];
#pragma unroll
  for (int k = 0; k < kSiluPerThread; ++k) {
    const int64_t i = first + k * kSiluThreads;
    g[k] = i < inner ? to_float(gate[i]) : 0.0f;
    u[k] = i < inner ? to_float(up[i]) : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kSiluPerThread; ++k) {
    const int64_t i = first + k * kSiluThreads;
    // at::silu, then the product
    if (i < inner) out[i] = from_float<T>(rounded<T>(g[k] / (1.0f + expf(-g[k]))) * u[k]);
  }
}

// One warp per (cell, head) pair; the head's values wait in the warp's share of
// shared memory, where RoPE reads each one's partner.
template <typename T>
__global__ void qkv_prologue_kernel(QkvPrologueArgs a) {
  extern __shared__ float heads_held[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, dim = a.dim;
  const int all_heads = a.heads + 2 * a.kv_heads;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kHeadWarps + warp;
  if (pair >= static_cast<int64_t>(a.rows) * a.width * all_heads) return;  // the whole warp: it syncs only itself
  const int cell = static_cast<int>(pair / all_heads);
  const int h = static_cast<int>(pair - static_cast<int64_t>(cell) * all_heads);
  const T* __restrict__ in = static_cast<const T*>(a.qkv) + pair * dim;
  const int64_t cache_row = a.slot_row[cell], slot = a.slot_index[cell];
  if (h >= a.heads + a.kv_heads) {  // a v head: to the cache as it is
    const int64_t kv = h - a.heads - a.kv_heads;
    T* out = static_cast<T*>(a.v_cache) + ((cache_row * a.kv_heads + kv) * a.capacity + slot) * dim;
#pragma unroll 4
    for (int i = lane; i < dim; i += 32) out[i] = in[i];
    return;
  }
  float* head = heads_held + warp * dim;
#pragma unroll 4
  for (int i = lane; i < dim; i += 32) head[i] = to_float(in[i]);
  __syncwarp();
  if (a.norm_weight != nullptr) {
    // head_layer_norm_fused: layer_norm (two-pass mean and biased variance here), its result
    // rounded, then addcmul(bias, normed, weight) rounded.
    float total = 0.0f;
    for (int i = lane; i < dim; i += 32) total += head[i];
    const float mean = warp_all_sum(total) / static_cast<float>(dim);
    float spread = 0.0f;
    for (int i = lane; i < dim; i += 32) spread += (head[i] - mean) * (head[i] - mean);
    const float rstd = rsqrtf(warp_all_sum(spread) / static_cast<float>(dim) + a.norm_eps);
    const T* w = static_cast<const T*>(a.norm_weight) + static_cast<int64_t>(h) * dim;
    const T* b = static_cast<const T*>(a.norm_bias) + static_cast<int64_t>(h) * dim;
    for (int i = lane; i < dim; i += 32) {
      const float n = rounded<T>((head[i] - mean) * rstd);
      head[i] = rounded<T>(to_float(b[i]) + n * to_float(w[i]));
    }
    __syncwarp();
  }
  // RopeTable::apply: x * cos and partner(x) * signed_sin, each rounded, then their rounded sum.
  const int half = dim / 2;
  const T* cos = static_cast<const T*>(a.cos) + static_cast<int64_t>(cell) * dim;
  const T* sin = static_cast<const T*>(a.signed_sin) + static_cast<int64_t>(cell) * dim;
  T* out;
  if (h < a.heads) {
    out = static_cast<T*>(a.q_out) + (static_cast<int64_t>(cell) * a.heads + h) * dim;
  } else {
    out = static_cast<T*>(a.k_cache) + ((cache_row * a.kv_heads + (h - a.heads)) * a.capacity + slot) * dim;
  }
  for (int i = lane; i < dim; i += 32) {
    const int partner = a.rope_2d ? (i ^ 1) : (i < half ? i + half : i - half);
    const float straight = rounded<T>(head[i] * to_float(cos[i]));
    const float turned = rounded<T>(head[partner] * to_float(sin[i]));
    out[i] = from_float<T>(straight + turned);
  }
}

template <typename T>
void add_rms_norm_as(const AddRmsNormArgs& a, cudaStream_t stream) {
  // Enough threads that a row of up to kNormPerThread x 1024 elements is held in registers with
  // about half of them in use: more loads in flight, fewer in a row per thread.
  const int64_t wanted = (a.hidden + kNormPerThread / 2 - 1) / (kNormPerThread / 2);
  const int threads = static_cast<int>(std::clamp<int64_t>((wanted + 31) / 32 * 32, 32, kNormMaxThreads));
  add_rms_norm_kernel<T><<<static_cast<unsigned>(a.tokens), threads, 0, stream>>>(a);
}

template <typename T>
void silu_mul_as(const SiluMulArgs& a, cudaStream_t stream) {
  const int64_t per_block = static_cast<int64_t>(kSiluThreads) * kSiluPerThread;
  // Tokens on x, which takes 2^31 - 1 blocks (a prefill's rows x prompt); runs of a row on y.
  const dim3 grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>((a.inner + per_block - 1) / per_block));
  silu_mul_kernel<T><<<grid, kSiluThreads, 0, stream>>>(a);
}

template <typename T>
void qkv_prologue_as(const QkvPrologueArgs& a, cudaStream_t stream) {
  const int64_t pairs = static_cast<int64_t>(a.rows) * a.width * (a.heads + 2 * a.kv_heads);
  const auto blocks = static_cast<unsigned>((pairs + kHeadWarps - 1) / kHeadWarps);
  qkv_prologue_kernel<T><<<blocks, kHeadWarps * 32, kHeadWarps * a.dim * sizeof(float), stream>>>(a);
}

template <typename T>
struct AddRmsNormLaunch {
  static void run(const AddRmsNormArgs& a, cudaStream_t s) { add_rms_norm_as<T>(a, s); }
};
template <typename T>
struct SiluMulLaunch {
  static void run(const SiluMulArgs& a, cudaStream_t s) { silu_mul_as<T>(a, s); }
};
template <typename T>
struct QkvPrologueLaunch {
  static void run(const QkvPrologueArgs& a, cudaStream_t s) { qkv_prologue_as<T>(a, s); }
};

}  // namespace

void launch_add_rms_norm(const AddRmsNormArgs& args, StreamHandle stream) {
  if (args.tokens == 0) return;
  dispatch_element_type<AddRmsNormLaunch>(args.type, args, stream, "add_rms_norm");
}

void launch_silu_mul(const SiluMulArgs& args, StreamHandle stream) {
  if (args.tokens == 0 || args.inner == 0) return;
  dispatch_element_type<SiluMulLaunch>(args.type, args, stream, "silu_mul");
}

void launch_qkv_prologue(const QkvPrologueArgs& args, StreamHandle stream) {
  if (args.dim % 2 != 0 || args.dim > kMaxHeadDim) {
    throw std::invalid_argument("qkv_prologue: head size " + std::to_string(args.dim) + " is not supported");
  }
  if (args.rows == 0 || args.width == 0) return;
  dispatch_element_type<QkvPrologueLaunch>(args.type, args, stream, "qkv_prologue");
}

}  // namespace sjd::kernels
