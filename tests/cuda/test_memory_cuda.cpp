// What a GPU has for a generation: its free memory and what PyTorch's allocator holds
// unused (less a margin), and the estimate held against it, as the CPU's is against the
// machine's memory: too large is refused with both figures (exit code 2 in the program).
#include <catch2/catch.hpp>

#include "device_cases.h"
#include "engine/bundle.h"
#include "engine/memory_estimate.h"

using namespace sjd;

TEST_CASE("a GPU's available memory counts what the allocator holds unused", "[cuda][memory]") {
  const at::Device device = cuda_testing::device();
  const int64_t before = engine::available_device_memory(device);
  REQUIRE(before > (int64_t{2} << 30));
  constexpr int64_t kBlock = int64_t{1} << 30;
  {
    const at::Tensor held = at::empty({kBlock}, at::TensorOptions().dtype(at::kByte).device(device));
    CHECK(engine::available_device_memory(device) <= before - kBlock + (int64_t{64} << 20));
  }
  // Freed into the allocator's cache: still PyTorch's, and still available to the generation.
  CHECK(engine::available_device_memory(device) >= before - (int64_t{64} << 20));
  CHECK(engine::available_device_memory(at::Device(at::kCPU)) == -1);
}

TEST_CASE("an estimate past a GPU's available memory is refused naming both", "[cuda][memory]") {
  const at::Device device = cuda_testing::device();
  const int64_t available = engine::available_device_memory(device);
  engine::MemoryEstimate small;
  small.kv_cache = int64_t{1} << 20;
  CHECK_NOTHROW(engine::check_memory_fits(small, 0, device));
  engine::MemoryEstimate large;
  large.kv_cache = available + (int64_t{1} << 30);
  try {
    engine::check_memory_fits(large, 0, device);
    FAIL("no error");
  } catch (const engine::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("of memory available on " + device.str()) &&
                             Catch::Contains("KV cache " + engine::format_bytes(large.kv_cache)));
  }
  // --max-memory still decides where it is given.
  CHECK_NOTHROW(engine::check_memory_fits(large, large.total() + 1, device));
}
