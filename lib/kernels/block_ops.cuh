#pragma once
// Block-wide reductions and the block-parallel exponential race used by the
// kernels. Device code only. Every function must be called by all threads of
// the block (they synchronise), with blockDim.x a multiple of 32 and <= 1024.
#include <cstdint>

#include "kernels/philox.cuh"
#include "kernels/verify_math.cuh"

namespace sjd::kernels {

constexpr int kMaxWarps = 32;

// A candidate winner: higher score wins, the lower index among equal scores
// (the reference scans tokens in order and keeps the first maximum).
struct ScoredIndex {
  double score;
  int64_t index;
};

__device__ __forceinline__ ScoredIndex better(ScoredIndex a, ScoredIndex b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (b.score > a.score || (b.score == a.score && b.index < a.index)) return b;
  return a;
}

__device__ __forceinline__ ScoredIndex warp_best(ScoredIndex x) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    ScoredIndex other;
    other.score = __shfl_down_sync(0xFFFFFFFFu, x.score, offset);
    other.index = __shfl_down_sync(0xFFFFFFFFu, x.index, offset);
    x = better(x, other);
  }
  return x;
}

// The block's best (score, index); every thread gets the result.
__device__ inline ScoredIndex block_best(ScoredIndex x) {
  __shared__ ScoredIndex partial[kMaxWarps];
  __shared__ ScoredIndex result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  x = warp_best(x);
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    ScoredIndex y = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : ScoredIndex{0.0, -1};
    y = warp_best(y);
    if (lane == 0) result = y;
  }
  __syncthreads();
  return result;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_down_sync(0xFFFFFFFFu, x, offset);
  return x;
}

template <typename T>
__device__ __forceinline__ T warp_max(T x) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const T other = __shfl_down_sync(0xFFFFFFFFu, x, offset);
    x = other > x ? other : x;
  }
  return x;
}

// The warp's sum / max in every lane (the full warp must call).
__device__ __forceinline__ float warp_all_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, offset);
  return x;
}

__device__ __forceinline__ float warp_all_max(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, offset));
  return x;
}

// Block sum / max; every thread gets the result.
template <typename T>
__device__ T block_sum(T x) {
  __shared__ T partial[kMaxWarps];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  x = warp_sum(x);
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    T y = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : T(0);
    y = warp_sum(y);
    if (lane == 0) result = y;
  }
  __syncthreads();
  return result;
}

template <typename T>
__device__ T block_max(T x, T lowest) {
  __shared__ T partial[kMaxWarps];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  x = warp_max(x);
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    T y = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : lowest;
    y = warp_max(y);
    if (lane == 0) result = y;
  }
  __syncthreads();
  return result;
}

// Exponential race over weights(v), v in [0, n): argmax w(v) / E_v with E_v =
// -log U_v and U_v element v of `stream` (sampling::sample_race). Each thread
// takes whole Philox blocks, four tokens per counter, like the reference.
// Returns -1 when no weight is positive. A block of four tokens without a positive
// weight draws no Philox numbers (its words would go unused): a row restricted to
// the image codes (8198 of Lumina's 65536 ids) skips most of the vocabulary's.
template <typename Weight>
__device__ int64_t block_race(const Weight& weight, int64_t n, const PhiloxStream& stream) {
  ScoredIndex best{-1.0, -1};
  for (int64_t block = threadIdx.x; block * 4 < n; block += blockDim.x) {
    float w[4];
    bool any = false;
    for (int j = 0; j < 4; ++j) {
      const int64_t v = block * 4 + j;
      w[j] = v < n ? weight(v) : 0.0f;
      any |= w[j] > 0.0f;
    }
    if (!any) continue;
    const PhiloxWords words = philox_block(stream, static_cast<uint32_t>(block));
    for (int j = 0; j < 4; ++j) {
      if (!(w[j] > 0.0f)) continue;
      const double score = race_score(w[j], words.w[j]);
      if (score > best.score) best = {score, block * 4 + j};  // visited in increasing v: keeps the first maximum
    }
  }
  return block_best(best).index;
}

// block_race over a sparse row: weight(j) of the token ids[j], for j in [0, m) with ids increasing, and every
// token not listed weighing 0. Each listed token draws its own Philox word, as block_race gives it, so the
// winner is block_race's over the whole row.
template <typename Weight>
__device__ int64_t block_race_listed(const int32_t* ids, int m, const Weight& weight, const PhiloxStream& stream) {
  ScoredIndex best{-1.0, -1};
  for (int j = threadIdx.x; j < m; j += blockDim.x) {
    const float w = weight(j);
    if (!(w > 0.0f)) continue;
    const int64_t v = ids[j];
    const PhiloxWords words = philox_block(stream, static_cast<uint32_t>(v / 4));
    const double score = race_score(w, words.w[v % 4]);
    if (score > best.score) best = {score, v};  // ids increase along a thread's j: keeps the first maximum
  }
  return block_best(best).index;
}

// argmax of p (lowest index among ties, as std::max_element).
__device__ inline int64_t block_argmax(const float* p, int64_t n) {
  ScoredIndex best{0.0, -1};
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    if (best.index < 0 || static_cast<double>(p[v]) > best.score) best = {static_cast<double>(p[v]), v};
  }
  return block_best(best).index;
}

}  // namespace sjd::kernels
