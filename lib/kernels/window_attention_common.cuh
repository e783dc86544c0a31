#pragma once
// What the two chunk kernels of the window attention share (window_attention.cu:
// CUDA cores, few query vectors; window_attention_mma.cu: tensor cores, wide
// windows): the scratch of per-chunk partials and the kernel that combines them.
// Device code and launchers only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention_kernels.h"
#include "kernels/element_types.cuh"

namespace sjd::kernels::window_attention_detail {

__device__ __forceinline__ float minus_infinity() { return __int_as_float(0xff800000); }

// Where chunk `chunk` of query vector (row, head, slot) keeps its partials in the scratch.
struct ScratchLayout {
  int64_t chunks = 0, dim = 0, vectors = 0;  // vectors = rows x heads x W
  __device__ __host__ int64_t vector(int row, int head, int slot, int heads, int width) const {
    return (static_cast<int64_t>(row) * heads + head) * width + slot;
  }
  __device__ __host__ int64_t out_at(int64_t v, int64_t chunk) const { return (v * chunks + chunk) * dim; }
  __device__ __host__ int64_t max_at(int64_t v, int64_t chunk) const {
    return vectors * chunks * dim + v * chunks + chunk;
  }
  __device__ __host__ int64_t sum_at(int64_t v, int64_t chunk) const {
    return vectors * chunks * (dim + 1) + v * chunks + chunk;
  }
  __device__ __host__ int64_t floats() const { return vectors * chunks * (dim + 2); }
};

// Launches the tensor-core chunk kernel (window_attention_mma.cu) for 16-bit types.
void launch_wide_chunks(const WindowAttentionArgs& a, const ScratchLayout& layout, cudaStream_t stream);

namespace {

// One block per (row, head, window slot) in blockIdx.x = vector index.
template <typename T>
__global__ void window_attention_combine_kernel(WindowAttentionArgs a, ScratchLayout layout) {
  const int64_t vector = blockIdx.x;
  const int slot = static_cast<int>(vector % a.width);
  const int head = static_cast<int>((vector / a.width) % a.heads);
  const int row = static_cast<int>(vector / (static_cast<int64_t>(a.width) * a.heads));
  float top = minus_infinity();
  for (int64_t c = 0; c < layout.chunks; ++c) {
    if (a.scratch[layout.sum_at(vector, c)] > 0.0f) top = fmaxf(top, a.scratch[layout.max_at(vector, c)]);
  }
  float total = 0.0f;
  for (int64_t c = 0; c < layout.chunks; ++c) {
    const float sum = a.scratch[layout.sum_at(vector, c)];
    if (sum > 0.0f) total += sum * expf(a.scratch[layout.max_at(vector, c)] - top);
  }
  T* out = static_cast<T*>(a.out) + ((static_cast<int64_t>(row) * a.width + slot) * a.heads + head) * a.dim;
  for (int d = threadIdx.x; d < a.dim; d += blockDim.x) {
    float o = 0.0f;
    for (int64_t c = 0; c < layout.chunks; ++c) {
      if (a.scratch[layout.sum_at(vector, c)] > 0.0f) {
        o = __fmaf_rn(a.scratch[layout.out_at(vector, c) + d], expf(a.scratch[layout.max_at(vector, c)] - top), o);
      }
    }
    out[d] = from_float<T>(total > 0.0f ? o / total : 0.0f);  // a query that sees no key: 0, not NaN
  }
}

}  // namespace

}  // namespace sjd::kernels::window_attention_detail
