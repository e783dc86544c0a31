// The two builders of a forward's attention bias give the same bias, and the KV cache's
// device copy of the key flags stays equal to its host flags through commits and rollbacks.
#include <catch2/catch.hpp>

#include <random>

#include "model/attention_bias.h"
#include "model/kv_cache.h"

using namespace sjd::model;

namespace {

// A random window mask [rows][W][W]: each slot sees itself and some earlier slots (a chain or
// tree's ancestors look like this to the builders, which take any 0/1 pattern).
std::vector<uint8_t> random_windows(size_t rows, int64_t width, std::mt19937& rng) {
  std::vector<uint8_t> mask(rows * static_cast<size_t>(width * width), 0);
  std::bernoulli_distribution sees(0.6);
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* m = mask.data() + r * static_cast<size_t>(width * width);
    for (int64_t q = 0; q < width; ++q) {
      for (int64_t j = 0; j < q; ++j) m[q * width + j] = sees(rng) ? 1 : 0;
      m[q * width + q] = 1;
    }
  }
  return mask;
}

// Commits `count` slots with random flags (a quarter masked, as prompt padding is).
void commit_random(KvCache& cache, int64_t row, int64_t count, std::mt19937& rng) {
  std::bernoulli_distribution masked(0.25);
  std::vector<int64_t> kept;
  std::vector<uint8_t> valid;
  for (int64_t i = 0; i < count; ++i) {
    kept.push_back(i);
    valid.push_back(masked(rng) ? 0 : 1);
  }
  cache.commit_row(row, kept, valid);
}

// Both builders for `rows` of the cache, the device one from the cache's device flags.
void check_builders_agree(KvCache& cache, const std::vector<int64_t>& rows, int64_t width, int64_t extra_keys,
                          int64_t extra_stride, std::mt19937& rng) {
  int64_t longest = 0;
  for (int64_t r : rows) longest = std::max(longest, cache.length(r));
  const BiasShape shape{width, std::min(longest + width + extra_keys, cache.capacity()), 0};
  BiasShape padded = shape;
  padded.stride = shape.keys + extra_stride;
  const std::vector<uint8_t> windows = random_windows(rows.size(), width, rng);

  std::vector<float> buffer;
  BiasShape host_shape = shape;
  host_shape.stride = shape.keys;
  const at::Tensor host = host_attention_bias(cache, rows, host_shape, windows, buffer);

  std::vector<int64_t> lengths;
  for (int64_t r : rows) lengths.push_back(cache.length(r));
  const int64_t count = static_cast<int64_t>(rows.size());
  const at::Tensor valid = cache.device_key_valid().index_select(0, at::tensor(rows, at::kLong));
  const at::Tensor masks =
      at::from_blob(const_cast<uint8_t*>(windows.data()), {count, width, width}, at::kByte).clone();
  const at::Tensor built = device_attention_bias(valid, at::tensor(lengths, at::kLong), masks, padded, at::kFloat);
  REQUIRE(built.sizes() == host.sizes());
  CHECK(built.stride(2) == padded.stride);
  CHECK(at::equal(built, host));
  // In bf16 (a GPU model's dtype) the same 0 / -inf.
  const at::Tensor bf16 = device_attention_bias(valid, at::tensor(lengths, at::kLong), masks, padded, at::kBFloat16);
  CHECK(bf16.scalar_type() == at::kBFloat16);
  CHECK(at::equal(bf16.to(at::kFloat), host));
}

}  // namespace

TEST_CASE("the device-built attention bias equals the host-built one through commits and rollbacks", "[model]") {
  std::mt19937 rng(7);
  const int64_t rows = 5, capacity = 48;
  KvCache cache(/*layers=*/1, rows, /*kv_heads=*/1, capacity, /*head_dim=*/2, at::kFloat);
  for (int64_t r = 0; r < rows; ++r) commit_random(cache, r, 3 + 2 * r, rng);  // prompts of different lengths

  std::uniform_int_distribution<int64_t> width_of(1, 6), commit_of(0, 4), extra_of(0, 5);
  std::bernoulli_distribution roll(0.3);
  for (int step = 0; step < 40; ++step) {
    INFO("step " << step);
    // Rows of the step in any order, some left out (finished sequences).
    std::vector<int64_t> step_rows;
    for (int64_t r = 0; r < rows; ++r) {
      if ((r + step) % 4 != 3) step_rows.push_back(r);
    }
    std::shuffle(step_rows.begin(), step_rows.end(), rng);
    int64_t width = width_of(rng);
    for (int64_t r : step_rows) width = std::min(width, capacity - cache.length(r) - 4);
    if (width >= 1) check_builders_agree(cache, step_rows, width, extra_of(rng), 3 * (step % 3), rng);
    for (int64_t r = 0; r < rows; ++r) {
      // A rollback, and a commit that may write other flags over the dropped slots before the next step.
      if (roll(rng) && cache.length(r) > 2) cache.rollback(r, cache.length(r) - 2);
      if (cache.length(r) + 10 < capacity) commit_random(cache, r, commit_of(rng), rng);
    }
  }
}

TEST_CASE("the cache's device key flags follow every commit and rollback", "[model]") {
  KvCache cache(1, 2, 1, 8, 2, at::kFloat);
  cache.commit_row(0, {0, 1, 2}, {1, 0, 1});
  CHECK(at::equal(cache.device_key_valid()[0].narrow(0, 0, 3), at::tensor({1, 0, 1}, at::kByte)));
  cache.rollback(0, 1);
  cache.commit_row(0, {0, 1}, {1, 1});  // slot 1 was masked, now valid
  CHECK(at::equal(cache.device_key_valid()[0].narrow(0, 0, 3), at::tensor({1, 1, 1}, at::kByte)));
  cache.commit_row(1, {0}, {0});
  CHECK(cache.device_key_valid()[1][0].item<int>() == 0);
}
