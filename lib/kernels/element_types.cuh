#pragma once
// The element types the layer and attention kernels take (layer_kernels.h's
// ElementType), their conversions to and from float32, and the launch of a
// kernel instantiated for the type a tensor has. Device code and launchers only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/launch_check.cuh"
#include "kernels/layer_kernels.h"

namespace sjd::kernels {

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

// Runs Launch<T>::run(args, stream) for the element type, then checks the launch.
template <template <typename> class Launch, typename Args>
void dispatch_element_type(ElementType type, const Args& args, StreamHandle stream, const char* name) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case ElementType::kFloat32: Launch<float>::run(args, s); break;
    case ElementType::kBFloat16: Launch<__nv_bfloat16>::run(args, s); break;
    case ElementType::kFloat16: Launch<__half>::run(args, s); break;
    default: throw std::invalid_argument(std::string(name) + ": unknown element type");
  }
  check_launch(name);
}

}  // namespace sjd::kernels
