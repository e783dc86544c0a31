#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <c10/core/InferenceMode.h>

namespace sjd::model {
namespace {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // Computed in float32 whatever the weights' dtype (LlamaGen and bf16 need it).
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normed * weight.to(at::kFloat)).to(x.scalar_type());
}

// Chameleon qk-norm: LayerNorm over head_dim per head; weight/bias [heads, D].
at::Tensor head_layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  const at::Tensor xf = x.to(at::kFloat);  // [..., heads, D]
  const at::Tensor centred = xf - xf.mean(-1, true);
  const at::Tensor var = centred.pow(2).mean(-1, true);
  return (centred * at::rsqrt(var + eps) * w.to(at::kFloat) + b.to(at::kFloat)).to(x.scalar_type());
}

at::Tensor project(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); }

at::Tensor host_long(const std::vector<int64_t>& values, at::IntArrayRef shape, at::Device device) {
  // A read-only view of the host buffer (no copy on a CPU model; the buffer outlives the forward).
  return at::from_blob(const_cast<int64_t*>(values.data()), shape, at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace

Transformer::Transformer(TransformerConfig config, TransformerWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {}

at::Tensor Transformer::embed(const at::Tensor& tokens) const {
  return at::embedding(weights_.embed, tokens);
}

void Transformer::restrict_outputs(const std::vector<int64_t>& token_ids) {
  if (token_ids.empty() || static_cast<int64_t>(token_ids.size()) >= config_.vocab_size) {
    head_ids_ = at::Tensor();
    head_rows_ = at::Tensor();
    return;
  }
  for (int64_t id : token_ids) {
    if (id < 0 || id >= config_.vocab_size) {
      throw std::out_of_range("output head: token id " + std::to_string(id) + " outside the vocabulary of " +
                              std::to_string(config_.vocab_size));
    }
  }
  head_ids_ = at::tensor(token_ids, at::TensorOptions().dtype(at::kLong)).to(device());
  head_rows_ = weights_.lm_head.index_select(0, head_ids_).contiguous();
}

void Transformer::start(const std::vector<RowPrompt>& rows, int64_t max_generated, int64_t max_window) {
  int64_t longest = 0, last_position = 0;
  for (const auto& r : rows) {
    if (r.tokens.empty()) throw std::invalid_argument("transformer: a prompt row has no tokens");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.tokens.size()));
    for (int64_t p : r.positions) last_position = std::max(last_position, p);
  }
  cache_ = KvCache(config_.num_layers, static_cast<int64_t>(rows.size()), config_.num_kv_heads,
                   longest + max_generated + max_window + 1, config_.head_dim, dtype(), device());
  // Generated tokens and window nodes sit after each row's last prompt position.
  const int64_t max_position = last_position + max_generated + max_window + 1;
  if (rope_.max_position() != max_position) rope_ = RopeTable(config_, max_position, dtype(), device());
  next_position_.assign(rows.size(), 0);
  pending_valid_.clear();
  pending_root_embedding_.assign(rows.size(), at::Tensor());
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowPrompt& row = rows[r];
    prefill_row(static_cast<int64_t>(r), row);
    next_position_[r] = row.positions.back();
    const int64_t n = static_cast<int64_t>(row.tokens.size()) - 1;
    if (row.embeddings.defined()) pending_root_embedding_[r] = row.embeddings[n].to(device(), dtype());
    pending_valid_.push_back(row.key_valid.back());
  }
}

void Transformer::prefill_row(int64_t row, const RowPrompt& prompt) {
  const int64_t n = static_cast<int64_t>(prompt.tokens.size()) - 1;  // the last token is the first root
  for (int64_t begin = 0; begin < n; begin += kPrefillChunk) {
    const int64_t count = std::min(kPrefillChunk, n - begin);
    std::vector<int64_t> tokens(prompt.tokens.begin() + begin, prompt.tokens.begin() + begin + count);
    std::vector<int64_t> positions(prompt.positions.begin() + begin, prompt.positions.begin() + begin + count);
    std::vector<uint8_t> valid(prompt.key_valid.begin() + begin, prompt.key_valid.begin() + begin + count);
    // Causal within the chunk; a masked prompt key is hidden from later queries but each slot sees itself.
    std::vector<uint8_t> mask(static_cast<size_t>(count * count), 0);
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t j = 0; j <= i; ++j) mask[static_cast<size_t>(i * count + j)] = (valid[static_cast<size_t>(j)] || i == j) ? 1 : 0;
    }
    const at::Tensor hidden =
        prompt.embeddings.defined()
            ? prompt.embeddings.narrow(0, begin, count).unsqueeze(0).to(device(), dtype())
            : embed(at::tensor(tokens, at::TensorOptions().dtype(at::kLong)).to(device()).unsqueeze(0));
    forward_hidden({row}, hidden, positions, mask);
    std::vector<int64_t> kept(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) kept[static_cast<size_t>(j)] = j;
    cache_.commit_row(row, kept, valid);
  }
}

at::Tensor Transformer::forward(const std::vector<int64_t>& roots, const DraftTree& nodes) {
  return window_logits(roots, nodes).to(at::kCPU);  // a no-op for a CPU model
}

at::Tensor Transformer::window_logits(const std::vector<int64_t>& roots, const DraftTree& nodes) {
  const int64_t rows = cache_.rows();
  const int64_t width = 1 + static_cast<int64_t>(nodes.size());
  const size_t cells = static_cast<size_t>(rows * width);
  step_tokens_.resize(cells);
  step_positions_.resize(cells);
  std::vector<int64_t> row_ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    row_ids[static_cast<size_t>(r)] = r;
    const int64_t base = next_position_[static_cast<size_t>(r)];
    int64_t* tokens = step_tokens_.data() + r * width;
    int64_t* positions = step_positions_.data() + r * width;
    tokens[0] = roots[static_cast<size_t>(r)];
    positions[0] = base;
    for (size_t i = 0; i < nodes.size(); ++i) {
      tokens[i + 1] = nodes.tokens[i];
      positions[i + 1] = base + nodes.depth[i];
    }
  }
  // Window mask: slot 0 is the root; node i attends to the root, its ancestors and itself.
  // A root whose key is masked (a placeholder root, e.g. Lumina's unconditional row)
  // is invisible to the draft nodes too.
  step_mask_.assign(cells * static_cast<size_t>(width), 0);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* m = step_mask_.data() + r * width * width;
    const bool root_visible = pending_valid_[static_cast<size_t>(r)] != 0;
    m[0] = 1;
    for (size_t i = 0; i < nodes.size(); ++i) {
      uint8_t* slot = m + (static_cast<int64_t>(i) + 1) * width;
      slot[0] = root_visible ? 1 : 0;
      for (int a = static_cast<int>(i); a >= 0; a = nodes.parent[static_cast<size_t>(a)]) slot[a + 1] = 1;
    }
  }
  at::Tensor hidden = embed(host_long(step_tokens_, {rows, width}, device()));
  for (int64_t r = 0; r < rows; ++r) {  // a root that is still a prompt embedding (LlamaGen's last caption slot)
    const at::Tensor& root = pending_root_embedding_[static_cast<size_t>(r)];
    if (root.defined()) hidden[r][0].copy_(root);
  }
  return forward_hidden(row_ids, hidden, step_positions_, step_mask_);
}

void Transformer::commit(const std::vector<int>& path) {
  std::vector<int64_t> kept = {0};
  for (int node : path) kept.push_back(node + 1);
  for (int64_t r = 0; r < cache_.rows(); ++r) {
    std::vector<uint8_t> valid(kept.size(), 1);
    valid[0] = pending_valid_[static_cast<size_t>(r)];
    cache_.commit_row(r, kept, valid);
    next_position_[static_cast<size_t>(r)] += static_cast<int64_t>(kept.size());
    pending_valid_[static_cast<size_t>(r)] = 1;
    pending_root_embedding_[static_cast<size_t>(r)] = at::Tensor();
  }
}

void Transformer::rollback(int64_t tokens) {
  for (int64_t r = 0; r < cache_.rows(); ++r) {
    cache_.rollback(r, cache_.length(r) - tokens);
    next_position_[static_cast<size_t>(r)] -= tokens;
  }
}

at::Tensor Transformer::attention_bias(const std::vector<int64_t>& rows, int64_t width,
                                       const std::vector<uint8_t>& window_mask) {
  int64_t longest = 0;
  for (int64_t r : rows) longest = std::max(longest, cache_.length(r));
  const int64_t keys = longest + width;
  const float blocked = -std::numeric_limits<float>::infinity();
  bias_host_.assign(rows.size() * static_cast<size_t>(width * keys), blocked);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<uint8_t>& valid = cache_.key_valid(rows[i]);
    const int64_t committed = static_cast<int64_t>(valid.size());
    const uint8_t* window = window_mask.data() + i * static_cast<size_t>(width * width);
    for (int64_t q = 0; q < width; ++q) {
      float* out = bias_host_.data() + (static_cast<int64_t>(i) * width + q) * keys;
      for (int64_t j = 0; j < committed; ++j) out[j] = valid[static_cast<size_t>(j)] ? 0.0f : blocked;
      for (int64_t j = 0; j < width; ++j) out[committed + j] = window[q * width + j] ? 0.0f : blocked;
    }
  }
  return at::from_blob(bias_host_.data(), {static_cast<int64_t>(rows.size()), 1, width, keys}, at::kFloat)
      .to(device());
}

at::Tensor Transformer::attention(int64_t layer, const std::vector<int64_t>& rows, const at::Tensor& h,
                                  const RopeFactors& rope, const at::Tensor& bias) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const int64_t batch = h.size(0), width = h.size(1);
  const int64_t heads = config_.num_heads, kv_heads = config_.num_kv_heads, dim = config_.head_dim;
  const at::Tensor qkv = project(h, w.qkv).view({batch, width, heads + 2 * kv_heads, dim});
  at::Tensor qk = qkv.narrow(2, 0, heads + kv_heads);  // q and k heads get the same norm and rotation
  const at::Tensor v = qkv.narrow(2, heads + kv_heads, kv_heads);
  if (config_.qk_norm) qk = head_layer_norm(qk, w.qk_norm_w, w.qk_norm_b, config_.qk_norm_eps);
  qk = rope_.apply(qk, rope);
  const at::Tensor q = qk.narrow(2, 0, heads).transpose(1, 2);  // [rows, heads, W, D]
  const at::Tensor k = qk.narrow(2, heads, kv_heads).transpose(1, 2);
  const at::Tensor vt = v.transpose(1, 2);
  for (size_t i = 0; i < rows.size(); ++i) cache_.write(layer, rows[i], k[static_cast<int64_t>(i)], vt[static_cast<int64_t>(i)]);
  const int64_t count = bias.size(3);
  at::Tensor keys = cache_.keys(layer, rows, count);  // [rows, kv_heads, S, D]
  at::Tensor values = cache_.values(layer, rows, count);
  if (kv_heads != heads) {
    const int64_t group = heads / kv_heads;
    keys = keys.unsqueeze(2).expand({batch, kv_heads, group, count, dim}).reshape({batch, heads, count, dim});
    values = values.unsqueeze(2).expand({batch, kv_heads, group, count, dim}).reshape({batch, heads, count, dim});
  }
  at::Tensor out;
  if (!h.is_cpu()) {
    // GPU: the fused attention kernel, every row in one call, the bias added to the scores.
    out = at::scaled_dot_product_attention(q, keys, values, bias.to(q.scalar_type()));
  } else {
    // CPU: the exact math path the CPU tests' tolerances were set against.
    const at::Tensor scores = at::matmul(q, keys.transpose(2, 3)) / std::sqrt(static_cast<double>(dim));
    const at::Tensor probs = at::softmax(scores.to(at::kFloat) + bias, -1);  // [rows, heads, W, S]
    out = at::matmul(probs.to(values.scalar_type()), values);
  }
  return project(out.transpose(1, 2).reshape({batch, width, heads * dim}), w.o);
}

at::Tensor Transformer::output_logits(const at::Tensor& x) const {
  if (!head_ids_.defined()) return project(x, weights_.lm_head).to(at::kFloat);
  const at::Tensor some = project(x, head_rows_).to(at::kFloat);
  at::Tensor all = at::full({x.size(0), x.size(1), config_.vocab_size}, std::numeric_limits<float>::lowest(),
                            some.options());
  return all.index_copy_(2, head_ids_, some);
}

at::Tensor Transformer::forward_hidden(const std::vector<int64_t>& rows, const at::Tensor& hidden,
                                       const std::vector<int64_t>& positions,
                                       const std::vector<uint8_t>& window_mask) {
  c10::InferenceMode inference_mode;  // no autograd bookkeeping
  const int64_t batch = hidden.size(0), width = hidden.size(1);
  const at::Tensor bias = attention_bias(rows, width, window_mask);
  const RopeFactors rope = rope_.gather(host_long(positions, {batch, width}, device()));
  at::Tensor x = hidden;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    x = x + attention(l, rows, rms_norm(x, w.attn_norm, config_.norm_eps), rope, bias);
    const at::Tensor gate_up = project(rms_norm(x, w.mlp_norm, config_.norm_eps), w.gate_up);
    const int64_t inner = config_.intermediate_size;
    x = x + project(at::silu(gate_up.narrow(-1, 0, inner)) * gate_up.narrow(-1, inner, inner), w.down);
  }
  return output_logits(rms_norm(x, weights_.norm, config_.norm_eps));
}

}  // namespace sjd::model
