// The window attention's chunk kernel for wide windows (more query vectors per
// K/V head than CUDA cores keep up with: L = 64 chains, SJD-PAC's trees), on
// tensor cores through WMMA. One block per (span of 512 keys, run of 64 window
// slots, row x head); each of its 4 warps owns 16 slots. The span is read 64
// keys at a time, flash-attention style (a running max, sum and output per slot):
//   - the block reads its slots' bias for the 64 keys first, and keys that none
//     of them may see are not read (a graph's step spans the cache's capacity;
//     its rows' keys are about half): a chunk of only such keys is skipped, and
//     the others' K and V go to shared memory with zeros in their place (so a
//     stale or NaN cache slot cannot reach a product);
//   - per warp: S = q K^T (16 x 64, float accumulators), scaled, plus the bias;
//     the new running max, exp(s - max) rounded to the element type as P, the
//     running sum and output rescaled to the new max, and O += P V.
// The span's (max, sum, output) per slot go to the scratch that the combine
// kernel (window_attention_common.cuh) reduces over the spans: partials for
// every 512 keys, not every 64, since each is D floats per slot (as many bytes as
// the span's K and V at 64 slots).
// Shared memory: q, K, V [64][D] each in the element type, S [4][16][64] float,
// P [4][16][64], O [4][16][D] float: 104 KB at D = 128, above the 48 KB a launch
// gets unasked (two blocks per SM).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <stdexcept>

#include "kernels/launch_check.cuh"
#include "kernels/window_attention_common.cuh"

namespace sjd::kernels::window_attention_detail {
namespace {

constexpr int kKeys = 64;                          // keys per pass through shared memory
constexpr int kSpan = kWindowAttentionWideChunk;   // keys per block: 512
constexpr int kWarps = 4;
constexpr int kSlots = 16 * kWarps;                // window slots per block
constexpr int kMaxTiles = kWindowAttentionMaxDim / 16;

size_t shared_bytes(int dim, size_t element) {
  return (static_cast<size_t>(kSlots) + 2 * kKeys) * dim * element + kWarps * 16 * kKeys * (sizeof(float) + element) +
         static_cast<size_t>(kSlots) * dim * sizeof(float);
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) wide_chunk_kernel(WindowAttentionArgs a, ScratchLayout layout) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ unsigned char seen[kKeys];
  __shared__ float row_max[kWarps][16], row_sum[kWarps][16], row_scale[kWarps][16];
  const int dim = a.dim, group = a.heads / a.kv_heads, tiles = dim / 16;
  const int row = static_cast<int>(blockIdx.z) / a.heads, head = static_cast<int>(blockIdx.z) - row * a.heads;
  const int kv = head / group;
  const int first_slot = static_cast<int>(blockIdx.y) * kSlots, slots = min(kSlots, a.width - first_slot);
  const int64_t span_first = static_cast<int64_t>(blockIdx.x) * kSpan;
  const int span = static_cast<int>(min(static_cast<int64_t>(kSpan), a.keys_count - span_first));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool working = warp * 16 < slots;  // a warp past the block's last slot only joins the barriers

  T* q_held = reinterpret_cast<T*>(shared);                        // [kSlots][dim]
  T* k_held = q_held + kSlots * dim;                                // [kKeys][dim]
  T* v_held = k_held + kKeys * dim;                                 // [kKeys][dim]
  float* scores = reinterpret_cast<float*>(v_held + kKeys * dim);  // [kWarps][16][kKeys]
  T* probs = reinterpret_cast<T*>(scores + kWarps * 16 * kKeys);   // [kWarps][16][kKeys]
  float* output = reinterpret_cast<float*>(probs + kWarps * 16 * kKeys);  // [kWarps][16][dim] = [kSlots][dim]
  float* my_scores = scores + warp * 16 * kKeys;
  T* my_probs = probs + warp * 16 * kKeys;
  float* my_output = output + warp * 16 * dim;

  const T* q = static_cast<const T*>(a.q) + row * a.q_row + head * a.q_head;
  for (int e = threadIdx.x; e < kSlots * dim; e += blockDim.x) {
    const int s = e / dim, d = e - s * dim;
    q_held[e] = s < slots ? q[(first_slot + s) * a.q_slot + d] : from_float<T>(0.0f);
    output[e] = 0.0f;
  }
  if (threadIdx.x < kSlots) {
    row_max[threadIdx.x / 16][threadIdx.x % 16] = minus_infinity();
    row_sum[threadIdx.x / 16][threadIdx.x % 16] = 0.0f;
  }
  // K and V rows in 16-byte pieces.
  const int pieces = dim * static_cast<int>(sizeof(T)) / 16;
  const T* bias = static_cast<const T*>(a.bias) + row * a.bias_row + first_slot * a.bias_slot + span_first;
  const T* keys = static_cast<const T*>(a.keys) + row * a.kv_row + kv * a.kv_head + span_first * a.kv_slot;
  const T* values = static_cast<const T*>(a.values) + row * a.kv_row + kv * a.kv_head + span_first * a.kv_slot;

  for (int first = 0; first < span; first += kKeys) {
    const int count = min(kKeys, span - first);
    bool any = false;
    for (int j = threadIdx.x; j < kKeys; j += blockDim.x) {
      bool open = false;
      for (int s = 0; j < count && s < slots; ++s) {
        open |= to_float(bias[s * a.bias_slot + first + j]) > minus_infinity();
      }
      seen[j] = open;
      any |= open;
    }
    if (!__syncthreads_or(any)) continue;  // no slot of the block sees a key of these 64: none is read
    for (int e = threadIdx.x; e < kKeys * pieces; e += blockDim.x) {
      const int j = e / pieces, piece = e - j * pieces;
      uint4 k = make_uint4(0, 0, 0, 0), v = k;
      if (seen[j]) {
        k = reinterpret_cast<const uint4*>(keys + (first + j) * a.kv_slot)[piece];
        v = reinterpret_cast<const uint4*>(values + (first + j) * a.kv_slot)[piece];
      }
      reinterpret_cast<uint4*>(k_held + j * dim)[piece] = k;
      reinterpret_cast<uint4*>(v_held + j * dim)[piece] = v;
    }
    __syncthreads();
    if (working) {
      // S = q K^T: K's rows, read column-major, are K^T's columns.
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_tile[kKeys / 16];
#pragma unroll
      for (int n = 0; n < kKeys / 16; ++n) wmma::fill_fragment(s_tile[n], 0.0f);
      for (int k = 0; k < dim; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> q_part;
        wmma::load_matrix_sync(q_part, q_held + warp * 16 * dim + k, dim);
#pragma unroll
        for (int n = 0; n < kKeys / 16; ++n) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> k_part;
          wmma::load_matrix_sync(k_part, k_held + n * 16 * dim + k, dim);
          wmma::mma_sync(s_tile[n], q_part, k_part, s_tile[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < kKeys / 16; ++n) {
        wmma::store_matrix_sync(my_scores + n * 16, s_tile[n], kKeys, wmma::mem_row_major);
      }
      __syncwarp();
      // Each of the warp's 16 slots: two lanes, 32 keys each.
      const int r = lane >> 1, half = (lane & 1) * (kKeys / 2), slot = warp * 16 + r;
      const T* slot_bias = bias + slot * a.bias_slot + first;
      float* slot_scores = my_scores + r * kKeys;
      float top = minus_infinity();
      // Each lane starts at its own key (rotated by its slot), so the 16 slots' rows, 64 floats apart,
      // are not read from one shared-memory bank at once.
      for (int step = 0; step < kKeys / 2; ++step) {
        const int j = half + (step + r) % (kKeys / 2);
        const bool open = slot < slots && j < count && seen[j] && to_float(slot_bias[j]) > minus_infinity();
        const float s = open ? slot_scores[j] * a.scale + to_float(slot_bias[j]) : minus_infinity();
        slot_scores[j] = s;
        top = fmaxf(top, s);
      }
      top = fmaxf(top, __shfl_xor_sync(0xFFFFFFFFu, top, 1));
      const float old_max = row_max[warp][r], new_max = fmaxf(old_max, top);
      float total = 0.0f;
      for (int step = 0; step < kKeys / 2; ++step) {
        const int j = half + (step + r) % (kKeys / 2);
        // P as the products see it: rounded to T; the sum is of the rounded values.
        const T p = from_float<T>(slot_scores[j] > minus_infinity() ? expf(slot_scores[j] - new_max) : 0.0f);
        my_probs[r * kKeys + j] = p;
        total += to_float(p);
      }
      total += __shfl_xor_sync(0xFFFFFFFFu, total, 1);
      __syncwarp();  // every lane has read row_max before it changes
      if ((lane & 1) == 0) {
        // What the running sum and output were worth at the old max, at the new one (nothing before a first key).
        const float rescale = old_max > minus_infinity() ? expf(old_max - new_max) : 0.0f;
        row_scale[warp][r] = rescale;
        row_sum[warp][r] = row_sum[warp][r] * rescale + total;
        row_max[warp][r] = new_max;
      }
      __syncwarp();
      for (int e = lane; e < 16 * dim; e += 32) my_output[e] *= row_scale[warp][e / dim];
      __syncwarp();
      // O += P V, through the accumulators.
#pragma unroll
      for (int n = 0; n < kMaxTiles; ++n) {
        if (n >= tiles) break;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_tile;
        wmma::load_matrix_sync(o_tile, my_output + n * 16, dim, wmma::mem_row_major);
#pragma unroll
        for (int k = 0; k < kKeys; k += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> p_part;
          wmma::load_matrix_sync(p_part, my_probs + k, kKeys);
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> v_part;
          wmma::load_matrix_sync(v_part, v_held + k * dim + n * 16, dim);
          wmma::mma_sync(o_tile, p_part, v_part, o_tile);
        }
        wmma::store_matrix_sync(my_output + n * 16, o_tile, dim, wmma::mem_row_major);
      }
    }
    __syncthreads();  // K and V of these keys are read by every warp before the next ones come in
  }

  for (int e = threadIdx.x; e < slots * dim; e += blockDim.x) {
    const int s = e / dim, d = e - s * dim;
    const int64_t vector = layout.vector(row, head, first_slot + s, a.heads, a.width);
    const float sum = row_sum[s / 16][s % 16];
    if (d == 0) {
      a.scratch[layout.max_at(vector, blockIdx.x)] = row_max[s / 16][s % 16];
      a.scratch[layout.sum_at(vector, blockIdx.x)] = sum;
    }
    if (sum > 0.0f) a.scratch[layout.out_at(vector, blockIdx.x) + d] = output[e];
  }
}

template <typename T>
void launch_wide(const WindowAttentionArgs& a, const ScratchLayout& layout, cudaStream_t stream) {
  const size_t bytes = shared_bytes(a.dim, sizeof(T));
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(&wide_chunk_kernel<T>),
                              static_cast<int>(shared_bytes(kWindowAttentionMaxDim, sizeof(T))),
                              "window attention on tensor cores");
  const dim3 grid(static_cast<unsigned>(layout.chunks), static_cast<unsigned>((a.width + kSlots - 1) / kSlots),
                  static_cast<unsigned>(a.rows * a.heads));
  wide_chunk_kernel<T><<<grid, kWarps * 32, bytes, stream>>>(a, layout);
  check_launch("window_attention (tensor cores)");
}

}  // namespace

void launch_wide_chunks(const WindowAttentionArgs& a, const ScratchLayout& layout, cudaStream_t stream) {
  switch (a.type) {
    case ElementType::kBFloat16: launch_wide<__nv_bfloat16>(a, layout, stream); break;
    case ElementType::kFloat16: launch_wide<__half>(a, layout, stream); break;
    default: throw std::invalid_argument("window attention: tensor cores take bfloat16 and float16 only");
  }
}

}  // namespace sjd::kernels::window_attention_detail
