#include "model/step_graphs.h"

#include <stdexcept>
#include <vector>

#ifdef SJD_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace sjd::model {

int64_t StepGraphs::padded_width(int64_t width) {
  const int64_t nodes = width - 1;
  if (nodes <= 4) return width;
  // Steps alternate x1.5 and x4/3: 4, 6, 8, 12, 16, 24, 32, ... (every other one a power of two).
  int64_t bucket = 4;
  while (bucket < nodes) bucket = (bucket & (bucket - 1)) == 0 ? bucket + bucket / 2 : bucket / 3 * 4;
  return bucket + 1;
}

#ifdef SJD_WITH_CUDA

struct StepGraphs::Entry {
  at::cuda::CUDAGraph graph;
  Inputs inputs;  // static: the graph reads these addresses
  at::Tensor logits;
};

namespace {

// A static copy of `t` whose rows start 16-element aligned (the bias: see Transformer::attention_bias).
at::Tensor aligned_like(const at::Tensor& t) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  const int64_t last = sizes.back();
  sizes.back() = (last + 15) / 16 * 16;
  return at::empty(sizes, t.options()).narrow(-1, 0, last);
}

// After a capture that broke mid-way: some PyTorch versions leave the allocators routing to the
// pool when cudaStreamEndCapture fails (their capture_end throws before it ends the routing), and
// every later allocation would then ask whether its stream is capturing. Where capture_end did end
// it, these complain that nothing is routed, which is expected.
void end_pool_routing(c10::DeviceIndex device, c10::MempoolId_t pool) {
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
  } catch (...) {
  }
  try {
    at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
  } catch (...) {
  }
}

}  // namespace

StepGraphs::StepGraphs() = default;
StepGraphs::~StepGraphs() = default;
StepGraphs::StepGraphs(StepGraphs&&) noexcept = default;
StepGraphs& StepGraphs::operator=(StepGraphs&&) noexcept = default;

void StepGraphs::clear() {
  entries_.clear();
  // With its last graph gone the pool is only waiting to be freed, and PyTorch refuses to capture
  // into it again (its use count must be above zero): the next capture takes a new pool.
  pool_ = {0, 0};
}

at::Tensor StepGraphs::run(const Shape& shape, const Inputs& inputs, const Forward& forward) {
  auto it = entries_.find(shape);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxShapes) throw std::logic_error("step graphs: no room for another shape");
    auto entry = std::make_unique<Entry>();
    entry->inputs = {at::empty_like(inputs.tokens), at::empty_like(inputs.positions), aligned_like(inputs.bias),
                     at::empty_like(inputs.slot_rows), at::empty_like(inputs.slot_slots)};
    it = entries_.emplace(shape, std::move(entry)).first;
  }
  Entry& e = *it->second;
  const c10::cuda::CUDAGuard device_guard(inputs.tokens.device());
  e.inputs.tokens.copy_(inputs.tokens, /*non_blocking=*/true);
  e.inputs.positions.copy_(inputs.positions, true);
  e.inputs.bias.copy_(inputs.bias, true);
  e.inputs.slot_rows.copy_(inputs.slot_rows, true);
  e.inputs.slot_slots.copy_(inputs.slot_slots, true);
  if (!e.logits.defined()) {
    // Capture on a side stream after one eager run there (cuBLAS and the attention kernels set
    // up their workspaces outside the capture). Both runs write the same KV entries the replay
    // below writes again: a step is idempotent on its inputs. Every graph draws from one memory
    // pool: replays never overlap and each output is copied at once, so they may share it.
    const c10::DeviceIndex index = inputs.tokens.device().index();
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, index);
    current.synchronize();
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      try {
        forward(e.inputs);  // the eager warm-up: its errors are the step's own, not the capture's
        side.synchronize();
      } catch (...) {
        entries_.erase(it);  // no half-made entry keeps the shape's slot
        throw;
      }
      if (pool_.first == 0 && pool_.second == 0) pool_ = at::cuda::graph_pool_handle();
      try {
        e.graph.capture_begin(pool_);
      } catch (const std::exception& failure) {
        entries_.erase(it);
        throw CaptureFailure(failure.what());
      }
      try {
        e.logits = forward(e.inputs);
      } catch (const std::exception& failure) {
        // End the stream's capture and the pool's allocations before anything else touches
        // CUDA (capture_end's own complaint about a broken capture is expected), forget the shape.
        try {
          e.graph.capture_end();
        } catch (...) {
          end_pool_routing(index, pool_);
        }
        entries_.erase(it);
        throw CaptureFailure(failure.what());
      }
      try {
        e.graph.capture_end();
      } catch (const std::exception& failure) {  // an op that invalidated the capture
        end_pool_routing(index, pool_);
        entries_.erase(it);
        throw CaptureFailure(failure.what());
      }
    }
    side.synchronize();
  }
  e.graph.replay();
  return e.logits.clone();
}

#else

struct StepGraphs::Entry {};
StepGraphs::StepGraphs() = default;
StepGraphs::~StepGraphs() = default;
StepGraphs::StepGraphs(StepGraphs&&) noexcept = default;
StepGraphs& StepGraphs::operator=(StepGraphs&&) noexcept = default;
void StepGraphs::clear() { entries_.clear(); }

at::Tensor StepGraphs::run(const Shape&, const Inputs&, const Forward&) {
  throw std::invalid_argument("step graphs: this build of sjd has no CUDA");
}

#endif

}  // namespace sjd::model
