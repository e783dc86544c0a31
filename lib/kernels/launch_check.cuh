#pragma once
// Turns a failed kernel launch into an exception naming the kernel.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace sjd::kernels {

inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA kernel ") + kernel + ": " + cudaGetErrorString(status));
  }
}

}  // namespace sjd::kernels
