#pragma once
// Where a bench step's time goes, kernel by kernel: a few steps run under
// PyTorch's Kineto profiler, a Chrome trace saved (chrome://tracing, Perfetto),
// and the device's kernels summed by name per step. On a CPU the summary is of
// the ATen operators instead, with inclusive times (nested operators count in
// their callers too). A diagnostic that prints figures; nothing asserts them.
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace sjd::engine {

// One kernel (or operator) name's share of a profiled step.
struct KernelShare {
  std::string name;
  double calls_per_step = 0.0;
  double us_per_step = 0.0;
};

struct StepProfile {
  std::string label;          // "ar", "L=64", ...
  int steps = 0;              // steps run under the profiler
  std::string what;           // "GPU kernels and copies" | "ATen operators (inclusive)"
  double events_per_step = 0.0;
  double busy_us_per_step = 0.0;  // the summed durations of those events per step (inclusive on a CPU: may exceed wall)
  double wall_us_per_step = 0.0;  // the profiled steps' wall-clock time per step (profiler overhead included)
  std::vector<KernelShare> top;   // the largest shares, largest first
  std::string trace_path;
};

// Runs `step(i)` for i < steps under the profiler (the caller has warmed it up), waits for
// the device, saves the trace to `trace_path` and summarises the `top` largest names.
StepProfile profile_steps(const std::string& label, const at::Device& device, int steps,
                          const std::function<void(int)>& step, const std::string& trace_path, size_t top = 12);

std::string format_profile(const StepProfile& profile);
nlohmann::json to_json(const StepProfile& profile);

}  // namespace sjd::engine
