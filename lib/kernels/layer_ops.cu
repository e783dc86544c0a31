// The transformer layer's fused elementwise kernels (layer_kernels.h). They are
// memory-bound and tiny at decode shapes, so they are written for few launches,
// not for vector loads: one block per token (norms) or per (token, head) (the
// qkv prologue), arithmetic in float32, rounding to the element type exactly
// where the ATen ops they replace round.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/block_ops.cuh"
#include "kernels/launch_check.cuh"
#include "kernels/layer_kernels.h"

namespace sjd::kernels {
namespace {

constexpr int kNormThreads = 256;
constexpr int kHeadThreads = 128;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// x as an ATen op with a result of type T leaves it: rounded to T, read back as float.
template <typename T>
__device__ __forceinline__ float rounded(float x) { return to_float(from_float<T>(x)); }

template <typename T>
__global__ void add_rms_norm_kernel(AddRmsNormArgs a) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * a.hidden;
  const T* x = static_cast<const T*>(a.x) + base;
  const T* delta = a.delta != nullptr ? static_cast<const T*>(a.delta) + base : nullptr;
  const T* weight = static_cast<const T*>(a.weight);
  T* sum = a.sum != nullptr ? static_cast<T*>(a.sum) + base : nullptr;
  T* normed = static_cast<T*>(a.normed) + base;
  // The residual sum is what the next layer adds to, so it is rounded before it is squared,
  // as `x + delta` followed by a norm of its result would be.
  const auto value = [&](int64_t i) {
    return delta != nullptr ? rounded<T>(to_float(x[i]) + to_float(delta[i])) : to_float(x[i]);
  };
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    const float s = value(i);
    if (sum != nullptr) sum[i] = from_float<T>(s);
    squares += s * s;
  }
  const float rstd = rsqrtf(block_sum(squares) / static_cast<float>(a.hidden) + a.eps);
  for (int64_t i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    normed[i] = from_float<T>(value(i) * rstd * to_float(weight[i]));
  }
}

template <typename T>
__global__ void silu_mul_kernel(SiluMulArgs a) {
  const int64_t total = a.tokens * a.inner;
  const T* in = static_cast<const T*>(a.gate_up);
  T* out = static_cast<T*>(a.out);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / a.inner, i = e - t * a.inner;
    const float g = to_float(in[t * 2 * a.inner + i]);
    const float u = to_float(in[t * 2 * a.inner + a.inner + i]);
    out[e] = from_float<T>(rounded<T>(g / (1.0f + expf(-g))) * u);  // at::silu, then the product
  }
}

template <typename T>
__global__ void qkv_prologue_kernel(QkvPrologueArgs a) {
  extern __shared__ float head[];  // this head's values after the norm: RoPE reads each one's partner
  const int cell = blockIdx.x, h = blockIdx.y, dim = a.dim;
  const int all_heads = a.heads + 2 * a.kv_heads;
  const T* in = static_cast<const T*>(a.qkv) + (static_cast<int64_t>(cell) * all_heads + h) * dim;
  const int64_t cache_row = a.slot_row[cell], slot = a.slot_index[cell];
  if (h >= a.heads + a.kv_heads) {  // a v head: to the cache as it is (the whole block returns here)
    const int64_t kv = h - a.heads - a.kv_heads;
    T* out = static_cast<T*>(a.v_cache) + ((cache_row * a.kv_heads + kv) * a.capacity + slot) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) out[i] = in[i];
    return;
  }
  for (int i = threadIdx.x; i < dim; i += blockDim.x) head[i] = to_float(in[i]);
  __syncthreads();
  if (a.norm_weight != nullptr) {
    // head_layer_norm_fused: layer_norm (two-pass mean and biased variance here), its result
    // rounded, then addcmul(bias, normed, weight) rounded.
    float total = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) total += head[i];
    const float mean = block_sum(total) / static_cast<float>(dim);
    float spread = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) spread += (head[i] - mean) * (head[i] - mean);
    const float rstd = rsqrtf(block_sum(spread) / static_cast<float>(dim) + a.norm_eps);
    const T* w = static_cast<const T*>(a.norm_weight) + static_cast<int64_t>(h) * dim;
    const T* b = static_cast<const T*>(a.norm_bias) + static_cast<int64_t>(h) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      const float n = rounded<T>((head[i] - mean) * rstd);
      head[i] = rounded<T>(to_float(b[i]) + n * to_float(w[i]));
    }
    __syncthreads();
  }
  // RopeTable::apply: x * cos and partner(x) * signed_sin, each rounded, then their rounded sum.
  const int half = dim / 2;
  const T* cos = static_cast<const T*>(a.cos) + static_cast<int64_t>(cell) * dim;
  const T* sin = static_cast<const T*>(a.signed_sin) + static_cast<int64_t>(cell) * dim;
  T* out;
  if (h < a.heads) {
    const int row = cell / a.width, column = cell - row * a.width;
    out = static_cast<T*>(a.q_out) + ((static_cast<int64_t>(row) * a.heads + h) * a.width + column) * dim;
  } else {
    out = static_cast<T*>(a.k_cache) + ((cache_row * a.kv_heads + (h - a.heads)) * a.capacity + slot) * dim;
  }
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const int partner = a.rope_2d ? (i ^ 1) : (i < half ? i + half : i - half);
    const float straight = rounded<T>(head[i] * to_float(cos[i]));
    const float turned = rounded<T>(head[partner] * to_float(sin[i]));
    out[i] = from_float<T>(straight + turned);
  }
}

template <typename T>
void add_rms_norm_as(const AddRmsNormArgs& a, cudaStream_t stream) {
  add_rms_norm_kernel<T><<<static_cast<unsigned>(a.tokens), kNormThreads, 0, stream>>>(a);
}

template <typename T>
void silu_mul_as(const SiluMulArgs& a, cudaStream_t stream) {
  const int64_t total = a.tokens * a.inner;
  const int64_t blocks = std::min<int64_t>((total + kNormThreads - 1) / kNormThreads, 4096);
  silu_mul_kernel<T><<<static_cast<unsigned>(blocks), kNormThreads, 0, stream>>>(a);
}

template <typename T>
void qkv_prologue_as(const QkvPrologueArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.rows * a.width), static_cast<unsigned>(a.heads + 2 * a.kv_heads));
  qkv_prologue_kernel<T><<<grid, kHeadThreads, a.dim * sizeof(float), stream>>>(a);
}

// Runs `launch` instantiated for the element type.
template <template <typename> class Launch, typename Args>
void dispatch(ElementType type, const Args& args, StreamHandle stream, const char* name) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case ElementType::kFloat32: Launch<float>::run(args, s); break;
    case ElementType::kBFloat16: Launch<__nv_bfloat16>::run(args, s); break;
    case ElementType::kFloat16: Launch<__half>::run(args, s); break;
    default: throw std::invalid_argument(std::string(name) + ": unknown element type");
  }
  check_launch(name);
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
  dispatch<AddRmsNormLaunch>(args.type, args, stream, "add_rms_norm");
}

void launch_silu_mul(const SiluMulArgs& args, StreamHandle stream) {
  if (args.tokens == 0 || args.inner == 0) return;
  dispatch<SiluMulLaunch>(args.type, args, stream, "silu_mul");
}

void launch_qkv_prologue(const QkvPrologueArgs& args, StreamHandle stream) {
  if (args.dim % 2 != 0 || args.dim > kMaxHeadDim) {
    throw std::invalid_argument("qkv_prologue: head size " + std::to_string(args.dim) + " is not supported");
  }
  if (args.rows == 0 || args.width == 0) return;
  dispatch<QkvPrologueLaunch>(args.type, args, stream, "qkv_prologue");
}

}  // namespace sjd::kernels
