// Attention of a few query vectors per K/V head over a KV cache, the keys split
// into chunks (attention_kernels.h says why). Two kernels:
//   1. one block per (chunk, row, K/V head): the chunk's scores for every query
//      vector of the head's group, their max, exp(score - max), its sum, and the
//      partial output sum_j exp(s_j - max) v_j. A key that the bias blocks for
//      every query is never read, nor its value, and a chunk of only such keys
//      ends at once; this is what makes a replayed graph read only its rows' keys.
//   2. one block per (row, head, window slot): the chunks' partials combined
//      (rescaled to the largest max), divided by the total sum, written in
//      [rows, W, heads, D] order.
// Products are explicit fused multiply-adds: the kernels are built with
// --fmad=false (for the verification kernels' exact decisions), and here the
// rounding of a dot product is the kernel's own choice.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/attention_kernels.h"
#include "kernels/block_ops.cuh"
#include "kernels/element_types.cuh"
#include "kernels/window_attention_common.cuh"

namespace sjd::kernels {
namespace {

using namespace window_attention_detail;

// Four consecutive elements (8-byte aligned; 16 for float32) as float32.
__device__ __forceinline__ void load4(const float* p, float (&x)[4]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
}
__device__ __forceinline__ void load4(const __nv_bfloat16* p, float (&x)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(pairs[0]), b = __bfloat1622float2(pairs[1]);
  x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
}
__device__ __forceinline__ void load4(const __half* p, float (&x)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const auto* pairs = reinterpret_cast<const __half2*>(&raw);
  const float2 a = __half22float2(pairs[0]), b = __half22float2(pairs[1]);
  x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
}

// Eight consecutive elements (16-byte aligned) as float32.
__device__ __forceinline__ void load8(const float* p, float (&x)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&x)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    x[2 * i] = f.x, x[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void load8(const __half* p, float (&x)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const auto* pairs = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(pairs[i]);
    x[2 * i] = f.x, x[2 * i + 1] = f.y;
  }
}


constexpr int kChunk = kWindowAttentionChunk;
constexpr int kMaxQueries = kWindowAttentionMaxQueries;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

ScratchLayout scratch_layout(const WindowAttentionArgs& a) {
  const int64_t keys = window_attention_on_tensor_cores(a) ? kWindowAttentionWideChunk : kChunk;
  return {(a.keys_count + keys - 1) / keys, a.dim, static_cast<int64_t>(a.rows) * a.heads * a.width};
}

template <typename T>
__global__ void window_attention_chunk_kernel(WindowAttentionArgs a, ScratchLayout layout) {
  extern __shared__ float held[];
  __shared__ unsigned char seen[kChunk];  // whether some query may see key j of the chunk
  __shared__ float chunk_max[kMaxQueries], chunk_sum[kMaxQueries];
  __shared__ int live_end;                // one past the chunk's last seen key
  const int group = a.heads / a.kv_heads, queries = group * a.width, dim = a.dim;
  float* q_held = held;                   // [queries][dim]; query vector v = (g, w) is v = g * W + w
  float* weights = held + queries * dim;  // [queries][kChunk]: scores, then exp(score - chunk max)
  const int row = blockIdx.y / a.kv_heads, kv = blockIdx.y - row * a.kv_heads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int count = static_cast<int>(min(static_cast<int64_t>(kChunk), a.keys_count - first));

  const T* q = static_cast<const T*>(a.q) + row * a.q_row;
  for (int e = threadIdx.x; e < queries * dim; e += kThreads) {
    const int v = e / dim, d = e - v * dim, g = v / a.width, w = v - g * a.width;
    q_held[e] = to_float(q[(kv * group + g) * a.q_head + w * a.q_slot + d]) * a.scale;
  }
  if (threadIdx.x == 0) live_end = 0;
  __syncthreads();

  // Scores, a key per thread: its bias for each window slot, then, if any slot sees it, its dot products.
  const T* bias = static_cast<const T*>(a.bias) + row * a.bias_row + first;
  const T* keys = static_cast<const T*>(a.keys) + row * a.kv_row + kv * a.kv_head + first * a.kv_slot;
  for (int j = threadIdx.x; j < count; j += kThreads) {
    bool any = false;
    for (int w = 0; w < a.width; ++w) any |= to_float(bias[w * a.bias_slot + j]) > minus_infinity();
    seen[j] = any;
    if (!any) continue;
    atomicMax(&live_end, j + 1);
    float dot[kMaxQueries];
#pragma unroll
    for (int v = 0; v < kMaxQueries; ++v) dot[v] = 0.0f;
    const T* key = keys + j * a.kv_slot;
#pragma unroll 4
    for (int d = 0; d < dim; d += 8) {
      float k8[8];
      load8(key + d, k8);
#pragma unroll
      for (int v = 0; v < kMaxQueries; ++v) {
        if (v >= queries) break;
        const float* qv = q_held + v * dim + d;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot[v] = __fmaf_rn(qv[i], k8[i], dot[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < kMaxQueries; ++v) {
      if (v >= queries) break;
      weights[v * kChunk + j] = dot[v] + to_float(bias[(v % a.width) * a.bias_slot + j]);
    }
  }
  __syncthreads();
  const int live = live_end;

  // Each query vector's max and weights, a warp per vector; a vector that sees no key of the chunk has sum 0.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int v = warp; v < queries; v += kWarps) {
    float* row_weights = weights + v * kChunk;
    float top = minus_infinity();
    for (int j = lane; j < live; j += 32) {
      if (seen[j]) top = fmaxf(top, row_weights[j]);
    }
    top = warp_all_max(top);
    float total = 0.0f;
    for (int j = lane; j < live; j += 32) {
      const float p = seen[j] && top > minus_infinity() ? expf(row_weights[j] - top) : 0.0f;
      row_weights[j] = p;
      total += p;
    }
    total = warp_all_sum(total);
    if (lane == 0) chunk_max[v] = top, chunk_sum[v] = total;
  }
  __syncthreads();

  // The partial outputs over the seen keys only. A lane takes 4 dimensions of a key, a warp
  // 32 / (D / 4) keys at once, the 4 warps every 4th such group: each lane has many values in
  // flight, and each warp reads whole value rows.
  const T* values = static_cast<const T*>(a.values) + row * a.kv_row + kv * a.kv_head + first * a.kv_slot;
  const int lanes_per_key = dim / 4, keys_at_once = 32 / lanes_per_key;
  const int d0 = (lane % lanes_per_key) * 4;
  float acc[kMaxQueries][4];
#pragma unroll
  for (int v = 0; v < kMaxQueries; ++v) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[v][i] = 0.0f;
  }
#pragma unroll 4
  for (int j = warp * keys_at_once + lane / lanes_per_key; j < live; j += kWarps * keys_at_once) {
    if (!seen[j]) continue;  // an unseen value is never read
    float v4[4];
    load4(values + j * a.kv_slot + d0, v4);
#pragma unroll
    for (int v = 0; v < kMaxQueries; ++v) {
      if (v >= queries) break;
      const float p = weights[v * kChunk + j];
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[v][i] = __fmaf_rn(p, v4[i], acc[v][i]);
    }
  }
  // The lanes of one warp that hold the same dimensions (other keys), then the 4 warps through
  // shared memory (q and the weights are no longer read).
  for (int offset = lanes_per_key; offset < 32; offset *= 2) {
#pragma unroll
    for (int v = 0; v < kMaxQueries; ++v) {
      if (v >= queries) break;  // the same for the whole block: every lane shuffles alike
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[v][i] += __shfl_down_sync(0xFFFFFFFFu, acc[v][i], offset);
    }
  }
  __syncthreads();
  float* warp_sums = held;  // [kWarps][queries][dim]
  if (lane < lanes_per_key) {
#pragma unroll
    for (int v = 0; v < kMaxQueries; ++v) {
      if (v >= queries) break;
#pragma unroll
      for (int i = 0; i < 4; ++i) warp_sums[(warp * queries + v) * dim + d0 + i] = acc[v][i];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < queries * dim; e += kThreads) {
    const int v = e / dim, d = e - v * dim, g = v / a.width, w = v - g * a.width;
    const int64_t vector = layout.vector(row, kv * group + g, w, a.heads, a.width);
    if (d == 0) {
      a.scratch[layout.max_at(vector, blockIdx.x)] = chunk_max[v];
      a.scratch[layout.sum_at(vector, blockIdx.x)] = chunk_sum[v];
    }
    if (chunk_sum[v] == 0.0f) continue;  // the combine skips it without reading its output
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) total += warp_sums[(k * queries + v) * dim + d];
    a.scratch[layout.out_at(vector, blockIdx.x) + d] = total;
  }
}

template <typename T>
struct WindowAttentionLaunch {
  static void run(const WindowAttentionArgs& a, cudaStream_t stream) {
    const ScratchLayout layout = scratch_layout(a);
    if (window_attention_on_tensor_cores(a)) {
      launch_wide_chunks(a, layout, stream);
    } else {
      const int queries = a.heads / a.kv_heads * a.width;
      // q and the scores; later the warps' partial outputs in the same memory (at most 32 KB).
      const size_t shared = static_cast<size_t>(queries) * std::max(a.dim + kChunk, kWarps * a.dim) * sizeof(float);
      const dim3 grid(static_cast<unsigned>(layout.chunks), static_cast<unsigned>(a.rows * a.kv_heads));
      window_attention_chunk_kernel<T><<<grid, kThreads, shared, stream>>>(a, layout);
    }
    window_attention_combine_kernel<T>
        <<<static_cast<unsigned>(layout.vectors), static_cast<unsigned>(std::min(a.dim, kThreads)), 0, stream>>>(
            a, layout);
  }
};

}  // namespace

bool window_attention_on_tensor_cores(const WindowAttentionArgs& a) {
  return a.kv_heads > 0 && a.heads / a.kv_heads * a.width > kMaxQueries;
}

bool window_attention_takes_shape(const WindowAttentionArgs& a) {
  if (a.kv_heads <= 0 || a.heads <= 0 || a.heads % a.kv_heads != 0 || a.width <= 0 || a.dim < 8 ||
      a.dim > kWindowAttentionMaxDim || (a.dim & (a.dim - 1)) != 0) {
    return false;
  }
  // The combine kernel's blocks, one per (row, head, slot), on a grid's x: at most 2^31 - 1.
  if (static_cast<int64_t>(a.rows) * a.heads * a.width > 2147483647) return false;
  if (!window_attention_on_tensor_cores(a)) return static_cast<int64_t>(a.rows) * a.kv_heads <= 65535;
  const bool half_width = a.type == ElementType::kBFloat16 || a.type == ElementType::kFloat16;
  return half_width && a.dim >= 16 && static_cast<int64_t>(a.rows) * a.heads <= 65535;
}

int64_t window_attention_scratch_floats(const WindowAttentionArgs& args) { return scratch_layout(args).floats(); }

void launch_window_attention(const WindowAttentionArgs& a, StreamHandle stream) {
  if (!window_attention_takes_shape(a)) {
    throw std::invalid_argument("window_attention: " + std::to_string(a.heads) + " heads over " +
                                std::to_string(a.kv_heads) + " K/V heads, window " + std::to_string(a.width) +
                                ", head size " + std::to_string(a.dim) + " is not a shape it takes");
  }
  if (a.rows == 0 || a.keys_count == 0) return;
  dispatch_element_type<WindowAttentionLaunch>(a.type, a, stream, "window_attention");
}

}  // namespace sjd::kernels
