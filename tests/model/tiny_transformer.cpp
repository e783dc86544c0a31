#include "tiny_transformer.h"

#include <string>

namespace sjd::testing {

using model::TransformerConfig;

TransformerConfig tiny_config(bool qk_norm, int64_t kv_heads) {
  TransformerConfig c;
  c.vocab_size = 32;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = kv_heads;
  c.head_dim = 8;
  c.intermediate_size = 48;
  c.qk_norm = qk_norm;
  return c;
}

// Random weights in the HF key layout.
sjd::io::WeightMap tiny_weights(const TransformerConfig& c, uint64_t seed) {
  at::manual_seed(seed);
  sjd::io::WeightMap w;
  auto put = [&](const std::string& name, at::IntArrayRef shape, double scale) {
    w.insert(name, at::randn(shape) * scale, "test");
  };
  put("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, 1.0);
  put("model.norm.weight", {c.hidden_size}, 1.0);
  put("lm_head.weight", {c.vocab_size, c.hidden_size}, 0.3);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    put(p + "input_layernorm.weight", {c.hidden_size}, 1.0);
    put(p + "post_attention_layernorm.weight", {c.hidden_size}, 1.0);
    put(p + "self_attn.q_proj.weight", {c.num_heads * c.head_dim, c.hidden_size}, 0.3);
    put(p + "self_attn.k_proj.weight", {c.num_kv_heads * c.head_dim, c.hidden_size}, 0.3);
    put(p + "self_attn.v_proj.weight", {c.num_kv_heads * c.head_dim, c.hidden_size}, 0.3);
    put(p + "self_attn.o_proj.weight", {c.hidden_size, c.num_heads * c.head_dim}, 0.3);
    put(p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, 0.3);
    put(p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}, 0.3);
    put(p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}, 0.3);
    if (c.qk_norm) {
      put(p + "self_attn.q_norm.weight", {1, c.head_dim}, 1.0);
      put(p + "self_attn.q_norm.bias", {1, c.head_dim}, 0.1);
      put(p + "self_attn.k_norm.weight", {c.num_kv_heads, c.head_dim}, 1.0);
      put(p + "self_attn.k_norm.bias", {c.num_kv_heads, c.head_dim}, 0.1);
    }
  }
  return w;
}

}  // namespace sjd::testing
