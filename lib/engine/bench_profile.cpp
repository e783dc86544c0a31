#include "engine/bench_profile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "io/device_transfer.h"

namespace sjd::engine {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// Kineto's GPU activities (kernels, copies, memsets) carry the GPU's device type; the
// host's runtime calls and ATen operators carry the CPU's.
bool counted(const kineto::KinetoEvent& event, const at::Device& device) {
  return event.deviceType() == device.type();
}

}  // namespace

StepProfile profile_steps(const std::string& label, const at::Device& device, int steps,
                          const std::function<void(int)>& step, const std::string& trace_path, size_t top) {
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  io::synchronize(device);  // the warm-up's queued kernels (its last commit) are not the profiled steps'
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < steps; ++i) step(i);
    io::synchronize(device);
  } catch (...) {
    try {
      kineto::disableProfiler();  // a failed step must not leave the thread's profiler on
    } catch (...) {
      // the step's own error is the one to report
    }
    throw;
  }
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  const std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  result->save(trace_path);
  // Kineto only logs a trace it could not write.
  if (!std::filesystem::exists(trace_path)) throw std::runtime_error("profile: could not write " + trace_path);

  StepProfile out;
  out.label = label;
  out.steps = steps;
  out.what = device.is_cpu() ? "ATen operators (inclusive)" : "GPU kernels and copies";
  out.wall_us_per_step = wall_us / steps;
  out.trace_path = trace_path;
  std::map<std::string, KernelShare> by_name;
  const double wall_ns = wall_us * 1e3;
  for (const kineto::KinetoEvent& event : result->events()) {
    // A record longer than the whole profiled run is a broken one (CUPTI's timestamps when
    // sessions are restarted in one process), not a kernel.
    if (!counted(event, device) || static_cast<double>(event.durationNs()) > wall_ns) continue;
    KernelShare& share = by_name[event.name()];
    share.name = event.name();
    share.calls_per_step += 1.0 / steps;
    share.us_per_step += static_cast<double>(event.durationNs()) / 1e3 / steps;
    out.events_per_step += 1.0 / steps;
    out.busy_us_per_step += static_cast<double>(event.durationNs()) / 1e3 / steps;
  }
  // CUPTI only logs what it could not collect: an empty summary is a failed profile, not a
  // step without kernels.
  if (out.events_per_step == 0.0) throw std::runtime_error("profile: no " + out.what + " collected");
  for (auto& [name, share] : by_name) out.top.push_back(std::move(share));
  std::sort(out.top.begin(), out.top.end(),
            [](const KernelShare& a, const KernelShare& b) { return a.us_per_step > b.us_per_step; });
  if (out.top.size() > top) out.top.resize(top);
  return out;
}

std::string format_profile(const StepProfile& p) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "profile " << p.label << " (" << p.steps << " steps, trace " << p.trace_path << "): " << p.events_per_step
      << " " << p.what << " per step, " << p.busy_us_per_step << " us summed over them, " << p.wall_us_per_step
      << " us wall per step\n";
  for (const KernelShare& k : p.top) {
    // Kernel names can be whole template signatures: the start says which.
    const std::string name = k.name.size() > 90 ? k.name.substr(0, 87) + "..." : k.name;
    out << std::setw(10) << k.us_per_step << " us " << std::setw(7) << k.calls_per_step << "x  " << name << "\n";
  }
  return out.str();
}

nlohmann::json to_json(const StepProfile& p) {
  nlohmann::json top = nlohmann::json::array();
  for (const KernelShare& k : p.top) {
    top.push_back({{"name", k.name}, {"calls_per_step", k.calls_per_step}, {"us_per_step", k.us_per_step}});
  }
  return {{"label", p.label},
          {"steps", p.steps},
          {"what", p.what},
          {"events_per_step", p.events_per_step},
          {"busy_us_per_step", p.busy_us_per_step},
          {"wall_us_per_step", p.wall_us_per_step},
          {"top", top},
          {"trace", p.trace_path}};
}

}  // namespace sjd::engine
