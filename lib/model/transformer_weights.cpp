#include "model/transformer_weights.h"

#include <string>

namespace sjd::model {
namespace {

// Chameleon stores q/k LayerNorm weights as [1, D] (Lumina-mGPT) or [heads, D]
// (HF facebook/chameleon-7b); both broadcast over heads.
at::Tensor qk_norm_tensor(const io::WeightMap& w, const std::string& name, int64_t heads, int64_t head_dim) {
  const at::Tensor& t = w.get(name);
  if (t.dim() == 2 && t.size(1) == head_dim && (t.size(0) == 1 || t.size(0) == heads)) return t;
  return w.get(name, {heads, head_dim});  // throws with the expected shape
}

CheckpointLayer load_hf_layer(const io::WeightMap& w, const TransformerConfig& c, int64_t i) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t q_out = c.num_heads * c.head_dim;
  const int64_t kv_out = c.num_kv_heads * c.head_dim;
  CheckpointLayer l;
  l.attn_norm = w.get(p + "input_layernorm.weight", {c.hidden_size});
  l.q = w.get(p + "self_attn.q_proj.weight", {q_out, c.hidden_size});
  l.k = w.get(p + "self_attn.k_proj.weight", {kv_out, c.hidden_size});
  l.v = w.get(p + "self_attn.v_proj.weight", {kv_out, c.hidden_size});
  l.o = w.get(p + "self_attn.o_proj.weight", {c.hidden_size, q_out});
  if (c.qk_norm) {
    l.q_norm_w = qk_norm_tensor(w, p + "self_attn.q_norm.weight", c.num_heads, c.head_dim);
    l.q_norm_b = qk_norm_tensor(w, p + "self_attn.q_norm.bias", c.num_heads, c.head_dim);
    l.k_norm_w = qk_norm_tensor(w, p + "self_attn.k_norm.weight", c.num_kv_heads, c.head_dim);
    l.k_norm_b = qk_norm_tensor(w, p + "self_attn.k_norm.bias", c.num_kv_heads, c.head_dim);
  }
  l.mlp_norm = w.get(p + "post_attention_layernorm.weight", {c.hidden_size});
  l.gate = w.get(p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size});
  l.up = w.get(p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size});
  l.down = w.get(p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size});
  return l;
}

CheckpointLayer load_llamagen_layer(const io::WeightMap& w, const TransformerConfig& c, int64_t i) {
  const std::string p = "layers." + std::to_string(i) + ".";
  const int64_t q_out = c.num_heads * c.head_dim;
  const int64_t kv_out = c.num_kv_heads * c.head_dim;
  CheckpointLayer l;
  l.attn_norm = w.get(p + "attention_norm.weight", {c.hidden_size});
  const at::Tensor& qkv = w.get(p + "attention.wqkv.weight", {q_out + 2 * kv_out, c.hidden_size});
  l.q = qkv.narrow(0, 0, q_out);
  l.k = qkv.narrow(0, q_out, kv_out);
  l.v = qkv.narrow(0, q_out + kv_out, kv_out);
  l.o = w.get(p + "attention.wo.weight", {c.hidden_size, q_out});
  l.mlp_norm = w.get(p + "ffn_norm.weight", {c.hidden_size});
  l.gate = w.get(p + "feed_forward.w1.weight", {c.intermediate_size, c.hidden_size});
  l.up = w.get(p + "feed_forward.w3.weight", {c.intermediate_size, c.hidden_size});
  l.down = w.get(p + "feed_forward.w2.weight", {c.hidden_size, c.intermediate_size});
  return l;
}

at::Tensor cast(const at::Tensor& t, at::ScalarType dtype, at::Device device) {
  return t.defined() ? t.to(device, dtype).contiguous() : t;
}

}  // namespace

LayerWeights fuse_layer(CheckpointLayer l, const TransformerConfig& c, at::ScalarType dtype, at::Device device) {
  LayerWeights out;
  out.attn_norm = cast(l.attn_norm, dtype, device);
  out.qkv = cast(at::cat({l.q, l.k, l.v}, 0), dtype, device);
  out.o = cast(l.o, dtype, device);
  if (c.qk_norm) {
    const auto per_head = [&](const at::Tensor& q, const at::Tensor& k) {
      return at::cat({q.expand({c.num_heads, c.head_dim}), k.expand({c.num_kv_heads, c.head_dim})}, 0);
    };
    out.qk_norm_w = cast(per_head(l.q_norm_w, l.k_norm_w), dtype, device);
    out.qk_norm_b = cast(per_head(l.q_norm_b, l.k_norm_b), dtype, device);
  }
  out.mlp_norm = cast(l.mlp_norm, dtype, device);
  out.gate_up = cast(at::cat({l.gate, l.up}, 0), dtype, device);
  out.down = cast(l.down, dtype, device);
  return out;
}

TransformerWeights load_transformer_weights(const io::WeightMap& w, const TransformerConfig& c,
                                            at::ScalarType dtype, at::Device device) {
  const bool hf = c.key_style == KeyStyle::kHf;
  TransformerWeights out;
  out.embed = cast(w.get(hf ? "model.embed_tokens.weight" : "tok_embeddings.weight", {c.vocab_size, c.hidden_size}),
                   dtype, device);
  out.norm = cast(w.get(hf ? "model.norm.weight" : "norm.weight", {c.hidden_size}), dtype, device);
  out.lm_head = cast(w.get(hf ? "lm_head.weight" : "output.weight", {c.vocab_size, c.hidden_size}), dtype, device);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    out.layers.push_back(fuse_layer(hf ? load_hf_layer(w, c, i) : load_llamagen_layer(w, c, i), c, dtype, device));
  }
  return out;
}

}  // namespace sjd::model
