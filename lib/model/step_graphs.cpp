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
  // Past any cache (a hostile shape's estimate) a width is left as it is: the steps below would overflow.
  if (nodes <= 4 || nodes > (int64_t{1} << 60)) return width;
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

// Whether the allocators were still routing to `pool`; ends the routing where they were.
// (Some PyTorch versions leave it on when cudaStreamEndCapture fails: their capture_end throws
// before it ends the routing, and every later allocation would ask whether its stream captures.)
std::pair<bool, bool> end_pool_routing(c10::DeviceIndex device, c10::MempoolId_t pool) {
  std::pair<bool, bool> routed{false, false};
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
    routed.first = true;
  } catch (...) {  // not routing: capture_end ended it, or capture_begin never began it
  }
  try {
    at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
    routed.second = true;
  } catch (...) {
  }
  return routed;
}

// After a capture that failed: capture_begin took a use count of the pool in each allocator, and
// PyTorch gives it back (CUDAGraph::reset) only for a capture that ended, so without this the pool
// could never be freed, with whatever the failed capture allocated in it. `began`: capture_begin
// returned; where it threw, only the allocators it had begun routing took a count.
void abandon_capture(at::cuda::CUDAGraph& graph, c10::DeviceIndex device, c10::MempoolId_t pool, bool began) {
  try {
    graph.pool();  // answers only for a capture that ended: its reset gives the count back
    return;
  } catch (...) {
  }
  const auto [device_routed, host_routed] = end_pool_routing(device, pool);
  try {
    if (began || device_routed) c10::cuda::CUDACachingAllocator::releasePool(device, pool);
  } catch (...) {
  }
  try {
    if (began || host_routed) at::getHostAllocator(at::kCUDA)->release_pool(pool);
  } catch (...) {
  }
}

}  // namespace

StepGraphs::StepGraphs() = default;
StepGraphs::~StepGraphs() = default;
StepGraphs::StepGraphs(StepGraphs&&) noexcept = default;
StepGraphs& StepGraphs::operator=(StepGraphs&&) noexcept = default;

int64_t StepGraphs::static_bytes() const {
  int64_t total = 0;
  for (const auto& [shape, e] : entries_) {
    for (const at::Tensor* t : {&e->inputs.tokens, &e->inputs.positions, &e->inputs.bias, &e->inputs.slot_rows,
                                &e->inputs.slot_slots, &e->logits}) {
      if (t->defined()) total += static_cast<int64_t>(t->storage().nbytes());
    }
  }
  return total;
}

void StepGraphs::clear() {
  entries_.clear();
  // With its last graph gone the pool is only waiting to be freed, and PyTorch refuses to capture
  // into it again (its use count must be above zero): the next capture takes a new pool.
  pool_ = {0, 0};
}

at::Tensor StepGraphs::run(const Shape& shape, const Inputs& inputs, const Forward& forward) {
  const c10::cuda::CUDAGuard device_guard(inputs.tokens.device());
  auto it = entries_.find(shape);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxShapes) throw std::logic_error("step graphs: no room for another shape");
    auto entry = std::make_unique<Entry>();
    try {
      entry->inputs = {at::empty_like(inputs.tokens), at::empty_like(inputs.positions), aligned_like(inputs.bias),
                       at::empty_like(inputs.slot_rows), at::empty_like(inputs.slot_slots)};
    } catch (const c10::OutOfMemoryError& failure) {  // no room for a graph's inputs: the step can still run eagerly
      throw CaptureFailure(failure.what());
    }
    it = entries_.emplace(shape, std::move(entry)).first;
  }
  Entry& e = *it->second;
  e.inputs.tokens.copy_(inputs.tokens, /*non_blocking=*/true);
  e.inputs.positions.copy_(inputs.positions, true);
  e.inputs.bias.copy_(inputs.bias, true);
  e.inputs.slot_rows.copy_(inputs.slot_rows, true);
  e.inputs.slot_slots.copy_(inputs.slot_slots, true);
  if (!e.logits.defined()) capture(it, forward);
  e.graph.replay();
  // A copy, at once, on the replay's stream: the graphs share one pool and replay in any order, which
  // PyTorch calls safe only in capture order. It is safe here because a graph's output tensor stays
  // allocated while its entry lives and nothing outside reads it after the next replay. Handing
  // out e.logits itself (or copying it later) would let another graph's replay overwrite it.
  return e.logits.clone();
}

void StepGraphs::capture(std::map<Shape, std::unique_ptr<Entry>>::iterator it, const Forward& forward) {
  // Capture on the side stream after one eager run there (cuBLAS and the attention kernels set
  // up their workspaces outside the capture). Both runs write the same KV entries the replay
  // that follows writes again: a step is idempotent on its inputs. Every graph draws from one
  // memory pool: replays never overlap and each output is copied at once, so they may share it.
  Entry& e = *it->second;
  const c10::DeviceIndex index = e.inputs.tokens.device().index();
  if (!capture_stream_ || capture_stream_->device_index() != index)
    capture_stream_ = c10::cuda::getStreamFromPool(false, index).unwrap();
  const c10::cuda::CUDAStream side(*capture_stream_);
  c10::cuda::getCurrentCUDAStream(index).synchronize();
  const c10::cuda::CUDAStreamGuard guard(side);
  try {
    forward(e.inputs);  // the eager warm-up: its errors are the step's own, not the capture's
    side.synchronize();
  } catch (...) {
    entries_.erase(it);  // no half-made entry keeps the shape's slot
    throw;
  }
  if (pool_.first == 0 && pool_.second == 0) pool_ = at::cuda::graph_pool_handle();
  // A failed capture forgets the shape; the pool is given up too when no graph holds it.
  const auto fail = [&](const char* why, bool began) {
    abandon_capture(e.graph, index, pool_, began);
    entries_.erase(it);
    if (entries_.empty()) pool_ = {0, 0};
    return CaptureFailure(why);
  };
  try {
    e.graph.capture_begin(pool_);
  } catch (const std::exception& failure) {
    throw fail(failure.what(), /*began=*/false);
  }
  try {
    e.logits = forward(e.inputs);
  } catch (const std::exception& failure) {
    // End the stream's capture before anything else touches CUDA (capture_end's own complaint
    // about a broken capture is expected).
    try {
      e.graph.capture_end();
    } catch (...) {
    }
    throw fail(failure.what(), true);
  }
  try {
    e.graph.capture_end();
  } catch (const std::exception& failure) {  // an op that invalidated the capture
    throw fail(failure.what(), true);
  }
  side.synchronize();
}

#else

struct StepGraphs::Entry {};
int64_t StepGraphs::static_bytes() const { return 0; }
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
