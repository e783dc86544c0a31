// The static KV cache: a step's keys land after each row's own committed length.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "model/kv_cache.h"

using sjd::model::KvCache;

namespace {

// Distinct values for every (row, slot, head, dim): [rows, width, kv_heads, head_dim].
at::Tensor step_values(int64_t rows, int64_t width, int64_t heads, int64_t dim, double offset) {
  return at::arange(rows * width * heads * dim, at::kFloat).reshape({rows, width, heads, dim}) + offset;
}

// Commits `count` placeholder slots to a row (its length grows by count).
void grow(KvCache& cache, int64_t row, int64_t count) {
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < count; ++i) kept.push_back(i);
  cache.commit_row(row, kept, std::vector<uint8_t>(kept.size(), 1));
}

}  // namespace

TEST_CASE("a step's keys and values go after each row's own length and nowhere else", "[model]") {
  const int64_t heads = 2, dim = 3, width = 2;
  KvCache cache(/*layers=*/2, /*rows=*/4, heads, /*capacity=*/8, dim, at::kFloat);
  grow(cache, 0, 1);
  grow(cache, 1, 5);
  grow(cache, 3, 3);
  const std::vector<int64_t> rows = {3, 0, 1};  // any order, row 2 not in the step
  // As the transformer hands them over: views into one [rows, W, q + k + v heads, D] projection.
  const at::Tensor qkv = step_values(3, width, 3 * heads, dim, 0.0);
  const at::Tensor k = qkv.narrow(2, heads, heads), v = qkv.narrow(2, 2 * heads, heads);
  REQUIRE_FALSE(k.is_contiguous());
  cache.write(1, cache.step_slots(rows, width), k, v);

  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t row = rows[i], start = cache.length(row);
    INFO("row " << row);
    // The cache is [rows, kv_heads, slots, head_dim]; the step's values are [rows, width, kv_heads, head_dim].
    const at::Tensor written_k = cache.keys(1, row, 1, start + width)[0].narrow(1, start, width);
    const at::Tensor written_v = cache.values(1, row, 1, start + width)[0].narrow(1, start, width);
    CHECK(at::equal(written_k, k[static_cast<int64_t>(i)].transpose(0, 1)));
    CHECK(at::equal(written_v, v[static_cast<int64_t>(i)].transpose(0, 1)));
    // The committed slots before the window and the free ones after it are untouched.
    CHECK(cache.keys(1, row, 1, start + width)[0].narrow(1, 0, start).abs().sum().item<float>() == 0.0f);
    CHECK(cache.keys(1, row, 1, 8)[0].narrow(1, start + width, 8 - start - width).abs().sum().item<float>() == 0.0f);
  }
  CHECK(cache.keys(1, 2, 1, 8).abs().sum().item<float>() == 0.0f);  // a row outside the step
  CHECK(cache.keys(0, 0, 4, 8).abs().sum().item<float>() == 0.0f);  // another layer
}

TEST_CASE("a step past a row's capacity is refused and names the row", "[model]") {
  KvCache cache(1, 2, 1, 4, 2, at::kFloat);
  grow(cache, 1, 3);
  CHECK_NOTHROW(cache.step_slots({0, 1}, 1));
  CHECK_THROWS_WITH(cache.step_slots({0, 1}, 2), Catch::Contains("of row 1") && Catch::Contains("capacity 4"));
}

TEST_CASE("one commit of several rows keeps each row's slots as copies made one by one would", "[model]") {
  const int64_t layers = 2, heads = 2, dim = 3, width = 6, capacity = 12;
  KvCache cache(layers, /*rows=*/4, heads, capacity, dim, at::kFloat);
  grow(cache, 0, 2);
  grow(cache, 2, 4);
  grow(cache, 3, 1);
  const std::vector<int64_t> rows = {0, 1, 2, 3};
  for (int64_t l = 0; l < layers; ++l) {
    const at::Tensor k = step_values(4, width, heads, dim, 1000.0 * static_cast<double>(l));
    cache.write(l, cache.step_slots(rows, width), k, -k);
  }
  // Row 2 keeps a path off the spine, row 3 a shorter one, row 0 its spine (nothing moves); row 1 is not in the step.
  const std::vector<KvCache::RowCommit> commits = {
      {2, {0, 2, 5}, {1, 1, 1}}, {0, {0, 1, 2}, {0, 1, 1}}, {3, {0, 3}, {1, 1}}};
  std::vector<int64_t> lengths_before;
  std::vector<at::Tensor> expected_k, expected_v;  // [layer * 4 + row]: [kv_heads, capacity, head_dim]
  for (int64_t r = 0; r < 4; ++r) lengths_before.push_back(cache.length(r));
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t r = 0; r < 4; ++r) {
      expected_k.push_back(cache.keys(l, r, 1, capacity)[0].clone());
      expected_v.push_back(cache.values(l, r, 1, capacity)[0].clone());
    }
  }
  for (const auto& c : commits) {  // the reference: in order, one slot at a time
    for (size_t i = 0; i < c.kept.size(); ++i) {
      const int64_t base = lengths_before[static_cast<size_t>(c.row)];
      for (int64_t l = 0; l < layers; ++l) {
        for (auto* expected : {&expected_k, &expected_v}) {
          at::Tensor& t = (*expected)[static_cast<size_t>(l * 4 + c.row)];
          t.narrow(1, base + static_cast<int64_t>(i), 1).copy_(t.narrow(1, base + c.kept[i], 1));
        }
      }
    }
  }
  const at::Tensor row2_before = cache.keys(0, 2, 1, capacity)[0].clone();
  cache.commit_rows(commits);

  CHECK(cache.length(0) == 5);
  CHECK(cache.length(1) == 0);
  CHECK(cache.length(2) == 7);
  CHECK(cache.length(3) == 3);
  CHECK(cache.key_valid(0) == std::vector<uint8_t>{1, 1, 0, 1, 1});
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t r = 0; r < 4; ++r) {
      INFO("layer " << l << ", row " << r);
      CHECK(at::equal(cache.keys(l, r, 1, capacity)[0], expected_k[static_cast<size_t>(l * 4 + r)]));
      CHECK(at::equal(cache.values(l, r, 1, capacity)[0], expected_v[static_cast<size_t>(l * 4 + r)]));
    }
  }
  // Not vacuous: row 2's kept slots did move.
  CHECK_FALSE(at::equal(cache.keys(0, 2, 1, capacity)[0], row2_before));
}

TEST_CASE("a commit that names a row twice or keeps slots out of order is refused", "[model]") {
  KvCache cache(1, 2, 1, 8, 2, at::kFloat);
  CHECK_THROWS_WITH(cache.commit_rows({{1, {0}, {1}}, {1, {0}, {1}}}), Catch::Contains("row 1 committed twice"));
  CHECK_THROWS_WITH(cache.commit_rows({{0, {0, 2, 1}, {1, 1, 1}}}), Catch::Contains("row 0 keeps slots"));
  CHECK_THROWS_WITH(cache.commit_rows({{0, {0, 8}, {1, 1}}}), Catch::Contains("inside the capacity"));
  CHECK(cache.length(0) == 0);
  CHECK(cache.length(1) == 0);
}
