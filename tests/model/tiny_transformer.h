#pragma once
// A tiny LLaMA-family transformer for the model tests (and the CUDA tests,
// which compare its forward on the device with the CPU's): its configuration
// and random weights in the Hugging Face key layout, loaded by the same loader
// as real checkpoints.
#include <cstdint>

#include "io/weights.h"
#include "model/transformer_config.h"

namespace sjd::testing {

// 4 heads of 8 dims, 2 layers, hidden 32, vocabulary 32; kv_heads < 4 is GQA.
model::TransformerConfig tiny_config(bool qk_norm, int64_t kv_heads = 2);

// Random weights in the HF key layout (seeded).
io::WeightMap tiny_weights(const model::TransformerConfig& c, uint64_t seed);

}  // namespace sjd::testing
