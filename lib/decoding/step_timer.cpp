#include "decoding/step_timer.h"

#include <ATen/DeviceAccelerator.h>

#include <algorithm>

namespace sjd::decoding {

// Timing-enabled events (BACKEND_DEFAULT), recorded on the device's current stream.
struct StepTimer::Events {
  explicit Events(at::Device device)
      : stream(at::accelerator::getCurrentStream(device.has_index() ? device.index()
                                                                    : at::accelerator::getDeviceIndex())),
        start(device.type(), c10::EventFlag::BACKEND_DEFAULT),
        forward(device.type(), c10::EventFlag::BACKEND_DEFAULT),
        pipeline(device.type(), c10::EventFlag::BACKEND_DEFAULT) {}
  c10::Stream stream;
  c10::Event start, forward, pipeline;
};

StepTimer::StepTimer(at::Device device) {
  if (!device.is_cpu()) events_ = std::make_unique<Events>(device);
}

StepTimer::~StepTimer() = default;

void StepTimer::start() {
  start_ = Clock::now();
  if (events_) events_->start.record(events_->stream);
}

void StepTimer::forward_queued() {
  forward_ = Clock::now();
  if (events_) events_->forward.record(events_->stream);
}

void StepTimer::pipeline_queued() {
  pipeline_ = Clock::now();
  if (events_) events_->pipeline.record(events_->stream);
}

StepSeconds StepTimer::finish() {
  StepSeconds s;
  if (!events_) {
    s.forward = std::chrono::duration<double>(forward_ - start_).count();
    s.pipeline = std::chrono::duration<double>(pipeline_ - forward_).count();
    return s;
  }
  events_->pipeline.synchronize();  // already done: the verifications read their results back
  const double wall = std::chrono::duration<double>(Clock::now() - start_).count();
  s.forward = events_->start.elapsedTime(events_->forward) / 1e3;
  s.pipeline = events_->forward.elapsedTime(events_->pipeline) / 1e3;
  s.verify = std::max(0.0, wall - s.forward - s.pipeline);
  return s;
}

}  // namespace sjd::decoding
