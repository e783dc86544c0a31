// Deterministic random weights for `sjd bench`, made on the device in the
// bench's dtype (a 7B model is never materialised in float32 on the host).
// scripts/bench_eager_reference.py computes the same numbers for the PyTorch
// reference: keep the two in step.
#include "engine/bench_setup.h"

#include <algorithm>
#include <cmath>

namespace sjd::engine {
namespace {

uint32_t fnv1a(const std::string& text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

constexpr int64_t kChunk = int64_t{1} << 26;  // elements hashed at once: bounds the int64 temporaries
constexpr double kRange = 0.02 * 1.7320508075688772;  // uniform(-a, a) has std a / sqrt(3) = 0.02

at::Tensor ones(at::IntArrayRef shape, const Placement& p) {
  return at::ones(shape, at::TensorOptions().dtype(p.dtype).device(p.device));
}

at::Tensor zeros(at::IntArrayRef shape, const Placement& p) {
  return at::zeros(shape, at::TensorOptions().dtype(p.dtype).device(p.device));
}

}  // namespace

at::Tensor hashed_weight(const std::string& name, at::IntArrayRef shape, uint64_t seed, const Placement& placement) {
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(placement.dtype).device(placement.device));
  at::Tensor flat = out.view({-1});
  const int64_t salt = static_cast<int64_t>(fnv1a(name) ^ static_cast<uint32_t>(seed));
  const int64_t mask = 0xFFFFFFFFLL;
  for (int64_t start = 0; start < flat.numel(); start += kChunk) {
    const int64_t count = std::min(kChunk, flat.numel() - start);
    at::Tensor h = at::arange(start, start + count, at::TensorOptions().dtype(at::kLong).device(placement.device));
    // An integer hash: every step stays below 2^63, so int64 arithmetic is exact on any device.
    h = (h * 2654435761LL + salt).bitwise_and(mask);
    h = h.bitwise_xor(h.bitwise_right_shift(16));
    h = (h * 0x45D9F3BLL).bitwise_and(mask);
    h = h.bitwise_xor(h.bitwise_right_shift(16));
    const at::Tensor u = h.to(at::kDouble) / 4294967296.0;  // [0, 1), exact
    flat.narrow(0, start, count).copy_((u * 2.0 - 1.0) * kRange);
  }
  return out;
}

model::TransformerWeights bench_weights(const model::TransformerConfig& c, uint64_t seed, const Placement& p) {
  const auto w = [&](const std::string& name, at::IntArrayRef shape) { return hashed_weight(name, shape, seed, p); };
  const int64_t q_out = c.num_heads * c.head_dim;
  const int64_t kv_out = c.num_kv_heads * c.head_dim;
  model::TransformerWeights out;
  out.embed = w("model.embed_tokens.weight", {c.vocab_size, c.hidden_size});
  out.norm = ones({c.hidden_size}, p);
  out.lm_head = w("lm_head.weight", {c.vocab_size, c.hidden_size});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    model::CheckpointLayer l;
    l.attn_norm = ones({c.hidden_size}, p);
    l.q = w(prefix + "self_attn.q_proj.weight", {q_out, c.hidden_size});
    l.k = w(prefix + "self_attn.k_proj.weight", {kv_out, c.hidden_size});
    l.v = w(prefix + "self_attn.v_proj.weight", {kv_out, c.hidden_size});
    l.o = w(prefix + "self_attn.o_proj.weight", {c.hidden_size, q_out});
    if (c.qk_norm) {
      l.q_norm_w = ones({c.num_heads, c.head_dim}, p);
      l.q_norm_b = zeros({c.num_heads, c.head_dim}, p);
      l.k_norm_w = ones({c.num_kv_heads, c.head_dim}, p);
      l.k_norm_b = zeros({c.num_kv_heads, c.head_dim}, p);
    }
    l.mlp_norm = ones({c.hidden_size}, p);
    l.gate = w(prefix + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size});
    l.up = w(prefix + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size});
    l.down = w(prefix + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size});
    out.layers.push_back(model::fuse_layer(std::move(l), c, p.dtype, p.device));
  }
  return out;
}

}  // namespace sjd::engine
