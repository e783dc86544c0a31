#include "engine/device.h"

#include <ATen/DeviceAccelerator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <sys/resource.h>
#include <torch/version.h>

#include "engine/bundle.h"

namespace sjd::engine {

namespace {

// K of "cuda:K" (one or two digits; more GPUs than 99 in one process is a typo), or "" for another name.
std::string cuda_index_digits(const std::string& device) {
  const std::string digits = device.rfind("cuda:", 0) == 0 ? device.substr(5) : std::string();
  const bool indexed =
      !digits.empty() && digits.size() <= 2 && digits.find_first_not_of("0123456789") == std::string::npos;
  return indexed ? digits : std::string();
}

}  // namespace

std::string dtype_problem(const std::string& dtype) {
  if (dtype == "f32" || dtype == "bf16") return {};
  return "unknown dtype '" + dtype + "' (expected f32 or bf16)";
}

std::string device_problem(const std::string& device) {
  if (device == "cpu" || device == "cuda" || !cuda_index_digits(device).empty()) return {};
  return "unknown device '" + device + "' (expected cpu, cuda or cuda:K)";
}

Placement parse_placement(const std::string& device, const std::string& dtype, const std::string& device_from) {
  Placement p;
  if (const std::string problem = dtype_problem(dtype); !problem.empty()) throw InputError("--dtype: " + problem);
  p.dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  if (const std::string problem = device_problem(device); !problem.empty()) throw InputError("--device: " + problem);
  if (device == "cpu") return p;
  const std::string digits = cuda_index_digits(device);
#ifndef SJD_WITH_CUDA
  throw InputError(device_from + " " + device + ": this build of sjd has no CUDA; configure it against a CUDA build of "
                   "PyTorch (docs/gpu.md), or use --device cpu");
#else
  if (!at::hasCUDA()) throw InputError(device_from + " " + device + ": no CUDA device is visible to this process");
  const auto index = static_cast<c10::DeviceIndex>(digits.empty() ? 0 : std::stoi(digits));
  c10::impl::VirtualGuardImpl cuda(at::kCUDA);
  if (index >= cuda.deviceCount()) {
    throw InputError(device_from + " " + device + ": this process sees " + std::to_string(cuda.deviceCount()) +
                     " GPU(s) (cuda:0..cuda:" + std::to_string(cuda.deviceCount() - 1) + ")");
  }
  p.device = at::Device(at::kCUDA, index);
  // The CUDA kernels launch on the current device: make it this one.
  cuda.setDevice(p.device);
  return p;
#endif
}

Placement placement_from_settings(const GenerationSettings& settings, const std::string& device_from) {
  return parse_placement(settings.device, settings.dtype, device_from);
}

std::string device_name(const at::Device& device) { return device.str(); }

std::string dtype_name(at::ScalarType dtype) { return dtype == at::kBFloat16 ? "bf16" : "f32"; }

// The accelerator memory statistics are in ATen from PyTorch 2.9 on.
#define SJD_HAS_ACCELERATOR_STATS (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9))

#if SJD_HAS_ACCELERATOR_STATS
// `--device cuda` names no index (-1), which the allocator's statistics refuse
// ("Invalid device argument"): such a device means the current one.
static c10::DeviceIndex stats_index(const at::Device& device) {
  return device.has_index() ? device.index() : at::accelerator::getDeviceIndex();
}
#endif

void reset_peak_memory(const at::Device& device) {
#if SJD_HAS_ACCELERATOR_STATS
  if (device.is_cpu()) return;
  // The caching allocator is set up by the first allocation on the device; before
  // it, resetting its statistics fails ("Invalid device argument: did you call init?").
  (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(device));
  at::accelerator::resetPeakStats(stats_index(device));
#endif
}

PeakMemory peak_memory(const at::Device& device) {
  PeakMemory out;
  if (device.is_cpu()) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    out.bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
    out.what = "peak host RSS";
    return out;
  }
#if SJD_HAS_ACCELERATOR_STATS
  const auto stats = at::accelerator::getDeviceStats(stats_index(device));
  out.bytes = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  out.what = "peak GPU memory allocated";
#else
  out.what = "peak GPU memory (unavailable before PyTorch 2.9)";
#endif
  return out;
}

}  // namespace sjd::engine
