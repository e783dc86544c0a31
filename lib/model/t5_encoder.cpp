#include "model/t5_encoder.h"

#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

#include "io/json_fields.h"

namespace sjd::model {
namespace {

int64_t positive(const nlohmann::json& j, const char* key, const std::string& where) {
  return io::required_integer(j, key, where, 1);
}

at::Tensor load(const io::WeightMap& w, const std::string& name, at::IntArrayRef shape) {
  // fp32 checkpoints stay memory-mapped: to() and contiguous() return them as they are.
  return w.get(name, shape).to(at::kFloat).contiguous();
}

at::Tensor t5_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return weight * (x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps));
}

// A bias-free linear layer: x W^T with W stored [out, in].
at::Tensor dense(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); }

}  // namespace

T5Config parse_t5_config(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + ": expected an object");
  T5Config c;
  c.vocab_size = positive(j, "vocab_size", where);
  c.d_model = positive(j, "d_model", where);
  c.num_layers = positive(j, "num_layers", where);
  c.num_heads = positive(j, "num_heads", where);
  c.d_kv = positive(j, "d_kv", where);
  c.d_ff = positive(j, "d_ff", where);
  c.relative_attention_num_buckets =
      io::optional_integer(j, "relative_attention_num_buckets", where, c.relative_attention_num_buckets, 1);
  c.relative_attention_max_distance =
      io::optional_integer(j, "relative_attention_max_distance", where, c.relative_attention_max_distance, 1);
  if (j.contains("layer_norm_epsilon")) {
    if (!j["layer_norm_epsilon"].is_number() || j["layer_norm_epsilon"].get<double>() <= 0.0) {
      throw std::invalid_argument(where + ".layer_norm_epsilon: expected a positive number");
    }
    c.layer_norm_epsilon = j["layer_norm_epsilon"].get<double>();
  }
  const std::string ff = j.value("feed_forward_proj", std::string("gated-gelu"));
  if (ff != "gated-gelu") {
    throw std::invalid_argument(where + ".feed_forward_proj: only \"gated-gelu\" (T5 v1.1, FLAN-T5) is supported, "
                                "got \"" + ff + "\"");
  }
  if (c.relative_attention_num_buckets % 4 != 0) {
    throw std::invalid_argument(where + ".relative_attention_num_buckets: must be a multiple of 4");
  }
  return c;
}

int64_t t5_relative_position_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2;  // bidirectional: keys after the query use the upper half
  const int64_t offset = relative_position > 0 ? half : 0;
  const int64_t distance = std::llabs(relative_position);
  const int64_t exact = half / 2;
  if (distance < exact) return offset + distance;
  const double scaled = std::log(static_cast<double>(distance) / exact) /
                        std::log(static_cast<double>(max_distance) / exact) * static_cast<double>(half - exact);
  return offset + std::min(exact + static_cast<int64_t>(scaled), half - 1);
}

T5Encoder::T5Encoder(T5Config config, const io::WeightMap& w) : config_(config) {
  const auto& c = config_;
  const int64_t inner = c.num_heads * c.d_kv;
  shared_ = load(w, "shared.weight", {c.vocab_size, c.d_model});
  relative_bias_ = load(w, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                        {c.relative_attention_num_buckets, c.num_heads});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "encoder.block." + std::to_string(i) + ".layer.";
    Block b;
    b.attn_norm = load(w, p + "0.layer_norm.weight", {c.d_model});
    b.q = load(w, p + "0.SelfAttention.q.weight", {inner, c.d_model});
    b.k = load(w, p + "0.SelfAttention.k.weight", {inner, c.d_model});
    b.v = load(w, p + "0.SelfAttention.v.weight", {inner, c.d_model});
    b.o = load(w, p + "0.SelfAttention.o.weight", {c.d_model, inner});
    b.ff_norm = load(w, p + "1.layer_norm.weight", {c.d_model});
    b.wi_0 = load(w, p + "1.DenseReluDense.wi_0.weight", {c.d_ff, c.d_model});
    b.wi_1 = load(w, p + "1.DenseReluDense.wi_1.weight", {c.d_ff, c.d_model});
    b.wo = load(w, p + "1.DenseReluDense.wo.weight", {c.d_model, c.d_ff});
    blocks_.push_back(std::move(b));
  }
  final_norm_ = load(w, "encoder.final_layer_norm.weight", {c.d_model});
}

at::Tensor T5Encoder::position_bias(int64_t tokens) const {
  std::vector<int64_t> buckets(static_cast<size_t>(tokens * tokens));
  for (int64_t query = 0; query < tokens; ++query) {
    for (int64_t key = 0; key < tokens; ++key) {
      buckets[static_cast<size_t>(query * tokens + key)] = t5_relative_position_bucket(
          key - query, config_.relative_attention_num_buckets, config_.relative_attention_max_distance);
    }
  }
  const at::Tensor index = at::tensor(buckets).view({tokens, tokens});
  return at::embedding(relative_bias_, index).permute({2, 0, 1}).contiguous();  // [heads, T, T]
}

at::Tensor T5Encoder::encode(const std::vector<int64_t>& ids, const std::vector<uint8_t>& mask) const {
  c10::InferenceMode inference_mode;
  const auto& c = config_;
  const int64_t tokens = static_cast<int64_t>(ids.size());
  if (tokens == 0) throw std::invalid_argument("T5 encoder: no tokens to encode");
  for (int64_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      throw std::invalid_argument("T5 encoder: token id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(c.vocab_size));
    }
  }
  if (!mask.empty() && mask.size() != ids.size()) {
    throw std::invalid_argument("T5 encoder: mask has " + std::to_string(mask.size()) + " entries for " +
                                std::to_string(tokens) + " tokens");
  }
  // Bias and pad-key mask are the same for every block; pad keys get -inf, so
  // their weight is exactly zero (HF adds the dtype's minimum, also giving 0).
  at::Tensor bias = position_bias(tokens);
  if (!mask.empty()) {
    std::vector<uint8_t> pad(mask.size());
    bool any_valid = false;
    for (size_t j = 0; j < mask.size(); ++j) {
      pad[j] = mask[j] ? 0 : 1;
      any_valid = any_valid || mask[j];
    }
    if (!any_valid) throw std::invalid_argument("T5 encoder: the mask marks every token as padding");
    const at::Tensor pad_keys = at::tensor(std::vector<int64_t>(pad.begin(), pad.end())).to(at::kBool);
    bias = bias.masked_fill(pad_keys.view({1, 1, tokens}), -INFINITY);
  }

  at::Tensor x = at::embedding(shared_, at::tensor(ids));  // [T, d_model]
  for (const Block& b : blocks_) {
    const at::Tensor h = t5_rms_norm(x, b.attn_norm, c.layer_norm_epsilon);
    const auto heads = [&](const at::Tensor& w) {
      return dense(h, w).view({tokens, c.num_heads, c.d_kv}).transpose(0, 1);  // [heads, T, d_kv]
    };
    const at::Tensor q = heads(b.q), k = heads(b.k), v = heads(b.v);
    const at::Tensor probs = at::softmax(at::matmul(q, k.transpose(1, 2)) + bias, -1);  // T5: no 1/sqrt(d_kv)
    const at::Tensor attended = at::matmul(probs, v).transpose(0, 1).reshape({tokens, c.num_heads * c.d_kv});
    x = x + dense(attended, b.o);
    const at::Tensor f = t5_rms_norm(x, b.ff_norm, c.layer_norm_epsilon);
    x = x + dense(at::gelu(dense(f, b.wi_0), "tanh") * dense(f, b.wi_1), b.wo);
  }
  return t5_rms_norm(x, final_norm_, c.layer_norm_epsilon);
}

}  // namespace sjd::model
