// StepGraphs on its own, with forwards small enough to reason about: a replay
// follows each call's inputs; every capture shares one stream, so the graphs'
// temporaries share their memory pool; a capture that fails gives its pool back,
// so the memory it took can be freed, and a later capture still works.
#include <catch2/catch.hpp>

#include <c10/cuda/CUDACachingAllocator.h>

#include "device_cases.h"
#include "model/step_graphs.h"

using namespace sjd;
using model::StepGraphs;

namespace {

StepGraphs::Inputs inputs_of(int64_t first, at::Device device) {
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  StepGraphs::Inputs in;
  in.tokens = at::arange(first, first + 6, longs).view({2, 3});
  in.positions = at::arange(0, 6, longs).view({2, 3}) * 10;
  in.bias = at::zeros({2, 1, 3, 40}, at::TensorOptions().dtype(at::kFloat).device(device));
  in.slot_rows = at::zeros({6}, longs);
  in.slot_slots = at::arange(0, 6, longs);
  return in;
}

at::Tensor expected(const StepGraphs::Inputs& in) { return in.tokens * 3 + in.positions; }

// A forward with a 4 MiB temporary: the caching allocator serves it from a 20 MiB segment.
at::Tensor with_temporary(const StepGraphs::Inputs& in) {
  const at::Tensor scratch = at::ones({1 << 20}, in.bias.options());
  return in.tokens * 3 + in.positions + scratch.sum().to(at::kLong) - (1 << 20);
}

int64_t reserved_bytes(at::Device device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
      .reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

constexpr int64_t kMiB = 1 << 20;

}  // namespace

TEST_CASE("a step graph replays with each call's inputs", "[cuda][graphs]") {
  const at::Device device = cuda_testing::device();
  StepGraphs graphs;
  const StepGraphs::Shape shape{0, 2, 3};
  for (int64_t first : {5, 100, -7}) {
    const StepGraphs::Inputs in = inputs_of(first, device);
    const at::Tensor out = graphs.run(shape, in, with_temporary);
    REQUIRE(at::equal(out, expected(in)));
  }
  CHECK(graphs.captured() == 1);
}

// The allocator's accounting, tagged apart from [graphs] (whose failure switches graphs off in
// device_check.sh): a memory figure that misses must not take the graphs' replays with it.
TEST_CASE("step graphs capture on one stream, so their temporaries share the pool", "[cuda][graph-memory]") {
  // Captured on streams of their own, each shape would keep its own 20 MiB segment in the pool
  // (and its warm-up one outside it): the allocator reuses a free block only on its stream.
  const at::Device device = cuda_testing::device();
  StepGraphs graphs;
  const StepGraphs::Inputs in = inputs_of(1, device);
  REQUIRE(at::equal(graphs.run({0, 2, 1}, in, with_temporary), expected(in)));
  const int64_t after_first = reserved_bytes(device);
  for (int64_t width = 2; width <= 6; ++width) {
    REQUIRE(at::equal(graphs.run({0, 2, width}, in, with_temporary), expected(in)));
  }
  CHECK(graphs.captured() == 6);
  CHECK(reserved_bytes(device) - after_first < 20 * kMiB);
}

TEST_CASE("a step graph capture that fails gives its memory pool back", "[cuda][graph-memory]") {
  const at::Device device = cuda_testing::device();
  // The allocator's statistics exist from the first allocation (CTest runs this case alone).
  (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(device));
  c10::cuda::CUDACachingAllocator::emptyCache();
  const int64_t before = reserved_bytes(device);
  {
    StepGraphs graphs;
    const StepGraphs::Inputs in = inputs_of(1, device);
    // A read to the host cannot be captured: the warm-up runs, the capture breaks.
    const auto reads_back = [](const StepGraphs::Inputs& i) {
      const at::Tensor scratch = at::ones({1 << 20}, i.bias.options());
      return i.tokens * 3 + i.positions + (scratch.sum().item<float>() > 0 ? 0 : 1);
    };
    CHECK_THROWS_AS(graphs.run({0, 2, 3}, in, reads_back), StepGraphs::CaptureFailure);
    CHECK(graphs.captured() == 0);
    // Another shape still captures and replays.
    for (int64_t first : {1, 9}) {
      const StepGraphs::Inputs next = inputs_of(first, device);
      REQUIRE(at::equal(graphs.run({0, 2, 4}, next, with_temporary), expected(next)));
    }
    CHECK(graphs.captured() == 1);
  }
  // Graphs gone, every pool freeable: the failed capture's segment goes with the rest.
  c10::cuda::CUDACachingAllocator::emptyCache();
  CHECK(reserved_bytes(device) - before < 20 * kMiB);
}
