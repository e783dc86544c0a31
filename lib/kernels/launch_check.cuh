#pragma once
// Turns a failed kernel launch into an exception naming the kernel, and lets a
// kernel use more than 48 KB of dynamic shared memory.
#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

namespace sjd::kernels {

inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA kernel ") + kernel + ": " + cudaGetErrorString(status));
  }
}

// Above 48 KB a kernel must ask for its dynamic shared memory on each device it runs on. The attribute is the
// function's, not a stream's: asked once per (device, kernel), at its first launch there. Both callers' first
// launches are eager: verification is never captured, and StepGraphs runs a step eagerly before capturing it.
inline void allow_dynamic_shared_memory(const void* kernel, int bytes, const char* what) {
  static std::mutex asking;
  static std::set<std::pair<int, const void*>> asked;
  int device = 0;
  cudaGetDevice(&device);
  const std::lock_guard<std::mutex> lock(asking);
  if (asked.count({device, kernel}) != 0) return;
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + std::to_string(bytes) + " bytes of shared memory: " +
                             cudaGetErrorString(status));
  }
  asked.insert({device, kernel});
}

}  // namespace sjd::kernels
