// The memory estimate's arithmetic: every term it names is in its total.
#include <catch2/catch.hpp>

#include "engine/bundle.h"
#include "engine/memory_estimate.h"

using namespace sjd;

namespace {

model::TransformerConfig small_config(int64_t vocab) {
  model::TransformerConfig config;
  config.hidden_size = 64;
  config.num_layers = 2;
  config.num_heads = 2;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  config.intermediate_size = 128;
  config.vocab_size = vocab;
  return config;
}

// A 20-token prompt and 100 image tokens, `rows` rows and windows of `window_nodes` drafts.
engine::GenerationShape shape_of(int64_t rows, int64_t window_nodes) {
  engine::GenerationShape shape;
  shape.rows = rows;
  shape.longest_prompt = 20;
  shape.image_tokens = 100;
  shape.window_nodes = window_nodes;
  return shape;
}

}  // namespace

TEST_CASE("the memory estimate counts every sequence's draft distributions", "[engine][memory]") {
  const model::TransformerConfig config = small_config(65536);
  engine::GenerationShape shape = shape_of(8, 16);
  const engine::MemoryEstimate without = engine::estimate_generation_memory(config, shape, at::kFloat);
  shape.sequences = 4;
  shape.draft_distributions = 50;
  const engine::MemoryEstimate with = engine::estimate_generation_memory(config, shape, at::kFloat);
  CHECK(with.drafts == 4 * 50 * 65536 * 4);
  CHECK(with.total() == without.total() + with.drafts);
  CHECK_THAT(with.describe(), Catch::Contains("drafts 52.43 MB"));
}

TEST_CASE("on a GPU the estimate counts the step graphs: their pool and each width's static tensors",
          "[engine][memory]") {
  const model::TransformerConfig config = small_config(65536);
  engine::GenerationShape shape = shape_of(8, 3);  // widths 1 to 4, each its own graph
  shape.head_rows = 10;
  const engine::MemoryEstimate eager = engine::estimate_generation_memory(config, shape, at::kBFloat16);
  shape.step_graphs = true;
  const engine::MemoryEstimate graphed = engine::estimate_generation_memory(config, shape, at::kBFloat16);
  CHECK(eager.graphs == 0);
  const int64_t capacity = 20 + 100 + 3 + 1;
  const int64_t per_slot = capacity * 2 + 10 * 4 + 32;  // bias row (bf16), logits of the head's rows, indices
  CHECK(graphed.graphs == graphed.window + 8 * (1 + 2 + 3 + 4) * per_slot);
  CHECK(graphed.total() == eager.total() + graphed.graphs);
  CHECK_THAT(graphed.describe(), Catch::Contains("step graphs"));
  CHECK_THAT(eager.describe(), !Catch::Contains("step graphs"));
}

TEST_CASE("on a GPU the cache's tail and the window step are as wide as the graph pads the window", "[engine][memory]") {
  // SJD-PAC's largest automatic tree: 145 nodes, a width of 146 that a graph pads to 193
  // (TokenModel::window_slots); the cache grows by the padding, in proportion to its slots.
  const model::TransformerConfig config = small_config(1000);
  engine::GenerationShape shape = shape_of(2, 145);
  const engine::MemoryEstimate eager = engine::estimate_generation_memory(config, shape, at::kBFloat16);
  shape.step_graphs = true;
  const engine::MemoryEstimate graphed = engine::estimate_generation_memory(config, shape, at::kBFloat16);
  CHECK(graphed.kv_cache * (20 + 100 + 146) == eager.kv_cache * (20 + 100 + 193));
  // The step itself (and the graphs' pool of its temporaries) runs at the padded width: as an eager
  // step of 192 nodes over the same cache.
  shape.step_graphs = false;
  shape.window_nodes = 192;
  const engine::MemoryEstimate padded = engine::estimate_generation_memory(config, shape, at::kBFloat16);
  CHECK(padded.kv_cache == graphed.kv_cache);
  CHECK(graphed.window == padded.window);
  CHECK(graphed.window > eager.window);
}

TEST_CASE("a window of any size counts at most the graph shapes a cache keeps", "[engine][memory]") {
  const model::TransformerConfig config = small_config(1000);
  engine::GenerationShape shape;
  shape.longest_prompt = 10;
  shape.image_tokens = 10;
  shape.window_nodes = int64_t{1} << 40;  // hostile: the estimate saturates, and comes back at once
  shape.step_graphs = true;
  const engine::MemoryEstimate huge = engine::estimate_generation_memory(config, shape, at::kFloat);
  CHECK(huge.total() >= (int64_t{1} << 60));
}

TEST_CASE("what the model already holds counts as available to the generation that takes it over",
          "[engine][memory]") {
  // compare's next method reserves its cache while the previous one's is still held: that cache is
  // freed or reused first, so it must not count against the new estimate.
  const at::Device cpu(at::kCPU);
  const int64_t available = engine::available_host_memory();
  REQUIRE(available >= 0);  // Linux says (MemAvailable)
  engine::MemoryEstimate estimate;
  estimate.kv_cache = available + (int64_t{4} << 30);
  CHECK_THROWS_AS(engine::check_memory_fits(estimate, 0, cpu), engine::InputError);
  CHECK_NOTHROW(engine::check_memory_fits(estimate, 0, cpu, int64_t{12} << 30));
  // --max-memory is a limit on the generation itself: what is held does not raise it.
  CHECK_THROWS_AS(engine::check_memory_fits(estimate, estimate.total() - 1, cpu, int64_t{12} << 30),
                  engine::InputError);
}

TEST_CASE("the transformer's weights are counted in the run's dtype and refused where they cannot fit",
          "[engine][memory]") {
  io::WeightMap weights;
  weights.insert("a", at::zeros({1000, 500}, at::kBFloat16), "m.safetensors");  // 1 MB as bf16 in the file
  weights.insert("b", at::zeros({250}, at::kFloat), "m.safetensors");
  CHECK(engine::transformer_weight_bytes(weights, at::kFloat) == (500000 + 250) * 4);  // every tensor is copied
  CHECK(engine::transformer_weight_bytes(weights, at::kBFloat16) == (500000 + 250) * 2);
  const int64_t f32 = engine::transformer_weight_bytes(weights, at::kFloat);
  CHECK_NOTHROW(engine::check_weights_fit(f32, f32, at::kCPU, at::kFloat));
  CHECK_NOTHROW(engine::check_weights_fit(f32, -1, at::kCPU, at::kFloat));  // unknown: nothing to hold it against
  CHECK_THROWS_WITH(engine::check_weights_fit(f32, f32 - 1, at::kCPU, at::kFloat),
                    Catch::Contains("the transformer's weights take 2.00 MB as f32 on cpu") &&
                        Catch::Contains("more than the 2.00 MB of memory available (--dtype bf16 takes half)"));
  CHECK_THROWS_WITH(engine::check_weights_fit(f32, 10, at::kCPU, at::kBFloat16), !Catch::Contains("takes half"));
}

TEST_CASE("sizes are written in a unit that shows them, down to single bytes", "[engine][memory]") {
  CHECK(engine::format_bytes(1200000000) == "1.20 GB");
  CHECK(engine::format_bytes(340000000) == "340.00 MB");
  CHECK(engine::format_bytes(1024) == "1.02 kB");  // --max-memory 1K once read "0.00 MB"
  CHECK(engine::format_bytes(512) == "512 bytes");
}
