// The memory estimate's arithmetic: every term it names is in its total.
#include <catch2/catch.hpp>

#include "engine/memory_estimate.h"

using namespace sjd;

TEST_CASE("the memory estimate counts every sequence's draft distributions", "[engine][memory]") {
  model::TransformerConfig config;
  config.hidden_size = 64;
  config.num_layers = 2;
  config.num_heads = 2;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  config.intermediate_size = 128;
  config.vocab_size = 65536;
  engine::GenerationShape shape;
  shape.rows = 8;
  shape.longest_prompt = 20;
  shape.image_tokens = 100;
  shape.window_nodes = 16;
  const engine::MemoryEstimate without = engine::estimate_generation_memory(config, shape, at::kFloat);
  shape.sequences = 4;
  shape.draft_distributions = 50;
  const engine::MemoryEstimate with = engine::estimate_generation_memory(config, shape, at::kFloat);
  CHECK(with.drafts == 4 * 50 * 65536 * 4);
  CHECK(with.total() == without.total() + with.drafts);
  CHECK_THAT(with.describe(), Catch::Contains("drafts 52.43 MB"));
}
