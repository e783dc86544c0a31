// One upload for a step's small arrays (io::StepUpload): each array comes back
// with its values, element type and count, at an aligned address inside the one
// buffer, whatever was added before it. On the CPU the buffer stays in host
// memory; the GPU's copy is the same bytes (tests/cuda run the kernels on it).
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "io/step_upload.h"

using namespace sjd;

TEST_CASE("a step's arrays come back from one buffer with their own values and types", "[io]") {
  io::StepUpload up;
  const size_t bytes = up.add(std::vector<uint8_t>{7, 8, 9});  // odd length: the next array must still align
  const size_t longs = up.add(std::vector<int64_t>{-1, 1LL << 40, 5});
  const size_t empty = up.add(std::vector<int32_t>{});
  const size_t ints = up.add(std::vector<int32_t>{3, -4});
  const size_t filled = up.add_filled<int64_t>(4, -1);
  const size_t zeros = up.add_filled<uint8_t>(5, 0);
  up.send(at::kCPU);

  CHECK(at::equal(up.tensor(bytes, at::kByte), at::tensor({7, 8, 9}, at::kByte)));
  CHECK(at::equal(up.tensor(longs, at::kLong), at::tensor({int64_t{-1}, int64_t{1} << 40, int64_t{5}}, at::kLong)));
  CHECK(up.tensor(empty, at::kInt).numel() == 0);
  CHECK(at::equal(up.tensor(ints, at::kInt), at::tensor({3, -4}, at::kInt)));
  CHECK(at::equal(up.tensor(filled, at::kLong), at::full({4}, -1, at::kLong)));
  CHECK(at::equal(up.tensor(zeros, at::kByte), at::zeros({5}, at::kByte)));
  // The raw addresses the kernels get: aligned, and the same values.
  const std::vector<std::pair<size_t, at::ScalarType>> arrays = {
      {bytes, at::kByte}, {longs, at::kLong}, {ints, at::kInt}, {filled, at::kLong}, {zeros, at::kByte}};
  for (const auto& [index, dtype] : arrays) {
    CHECK(reinterpret_cast<uintptr_t>(up.tensor(index, dtype).data_ptr()) % 16 == 0);
  }
  CHECK(reinterpret_cast<uintptr_t>(up.data<int64_t>(longs)) % 16 == 0);
  CHECK(up.data<int64_t>(longs)[1] == (int64_t{1} << 40));
  CHECK(up.data<int32_t>(ints)[1] == -4);
  // Outputs are written through the tensor views (as the kernels write through the addresses).
  up.tensor(filled, at::kLong)[2] = 11;
  CHECK(up.data<int64_t>(filled)[2] == 11);
  CHECK(up.data<int64_t>(longs)[2] == 5);  // its neighbour untouched
}

TEST_CASE("a step upload refuses reads before sending, adds after it and a wrong element type", "[io]") {
  io::StepUpload up;
  const size_t longs = up.add(std::vector<int64_t>{1, 2});
  CHECK_THROWS_WITH(up.tensor(longs, at::kLong), Catch::Contains("before send"));
  up.send(at::kCPU);
  CHECK_THROWS_WITH(up.add(std::vector<int64_t>{3}), Catch::Contains("after send"));
  CHECK_THROWS_WITH(up.tensor(longs, at::kInt), Catch::Contains("8-byte values"));
  CHECK_THROWS_WITH(up.data<int32_t>(longs), Catch::Contains("read as 4-byte"));
  CHECK_THROWS_AS(up.tensor(longs + 1, at::kLong), std::out_of_range);
  CHECK_THROWS_WITH(up.send(at::kCPU), Catch::Contains("sent twice"));
}
