#pragma once
// Where the transformer runs: `--device cpu|cuda` and `--dtype f32|bf16`
// (settings keys "device" and "dtype"), and the few device services the bench
// needs (waiting for queued work, peak memory) without CUDA headers.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "engine/settings.h"

namespace sjd::engine {

struct Placement {
  at::Device device = at::Device(at::kCPU);
  at::ScalarType dtype = at::kFloat;
};

// Parses and checks the settings' device and dtype. Bad names, and `cuda` on a
// build without CUDA ("this build of sjd has no CUDA; ...") or without a
// visible GPU, are InputError (exit code 2); `device_from` names where the
// device was set in the latter ("--device", or a config file's key). `cuda:K`
// picks the K-th visible GPU and makes it the calling thread's current device
// (where kernels launch); `cuda` is cuda:0.
Placement placement_from_settings(const GenerationSettings& settings, const std::string& device_from = "--device");
Placement parse_placement(const std::string& device, const std::string& dtype,
                          const std::string& device_from = "--device");

// What is wrong with a dtype or device name ("unknown dtype 'f16' (expected f32 or bf16)"), or "" for a
// name sjd knows; whether the device is there is parse_placement's to check.
std::string dtype_problem(const std::string& dtype);
std::string device_problem(const std::string& device);

std::string device_name(const at::Device& device);  // "cpu" | "cuda:0"
std::string dtype_name(at::ScalarType dtype);       // "f32" | "bf16"

// Peak memory since the last reset: the caching allocator's peak allocated
// bytes on a GPU, the process's peak resident set on the CPU.
struct PeakMemory {
  int64_t bytes = 0;
  std::string what;  // "peak GPU memory allocated" | "peak host RSS"
};
void reset_peak_memory(const at::Device& device);
PeakMemory peak_memory(const at::Device& device);

}  // namespace sjd::engine
