#pragma once
// Where a decode step's time goes (stats.json's forward / pipeline / verify), measured
// without making a GPU wait. On the CPU every call has finished when it returns, so
// the host clock splits the step. On a GPU the forward and the pipeline run queued:
// a host wait after each would leave the device idle while the host prepares the
// next phase (the pipeline's uploads and launches, the verifier's), so instead
// events recorded on the stream after each phase time them, and are read once the
// verification has waited for the device anyway; the verification gets the rest of
// the step's wall time.
#include <ATen/ATen.h>
#include <c10/core/Event.h>

#include <chrono>
#include <memory>

namespace sjd::decoding {

// Seconds of the host clock since `start` (the loop's and the generator's wall-clock figures).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct StepSeconds {
  double forward = 0.0;   // the shared forward, charged to every sequence of the step
  double pipeline = 0.0;  // the pipeline over every sequence's slots
  double verify = 0.0;    // the verifications and what else the step did (a GPU's device)
};

class StepTimer {
 public:
  explicit StepTimer(at::Device device);
  ~StepTimer();
  // Called as the step's phases are queued: before the forward, after it, after the pipelines.
  void start();
  void forward_queued();
  void pipeline_queued();
  // After the verifications: the step's seconds. On the CPU `verify` is 0 (each verification is
  // timed on the host by its sequence); on a GPU it is the wall time not in the other two.
  StepSeconds finish();
  bool host_timed() const { return events_ == nullptr; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Events;
  std::unique_ptr<Events> events_;  // GPU only
  Clock::time_point start_, forward_, pipeline_;
};

}  // namespace sjd::decoding
