#include "model/transformer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <c10/core/InferenceMode.h>

#include "model/rope.h"

namespace sjd::model {
namespace {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // Computed in float32 whatever the weights' dtype (LlamaGen and bf16 need it).
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normed * weight.to(at::kFloat)).to(x.scalar_type());
}

// Chameleon qk-norm: LayerNorm over head_dim per head; weight/bias [1 or heads, D].
at::Tensor head_layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  const at::Tensor xf = x.to(at::kFloat);  // [T, heads, D]
  const at::Tensor mean = xf.mean(-1, true);
  const at::Tensor var = (xf - mean).pow(2).mean(-1, true);
  return ((xf - mean) * at::rsqrt(var + eps) * w.to(at::kFloat) + b.to(at::kFloat)).to(x.scalar_type());
}

at::Tensor project(const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); }

}  // namespace

Transformer::Transformer(TransformerConfig config, TransformerWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {}

at::Tensor Transformer::embed(const at::Tensor& tokens) const {
  return at::embedding(weights_.embed, tokens);
}

void Transformer::start(const std::vector<RowPrompt>& rows, int64_t max_generated, int64_t max_window) {
  int64_t longest = 0;
  for (const auto& r : rows) longest = std::max<int64_t>(longest, static_cast<int64_t>(r.tokens.size()));
  cache_ = KvCache(config_.num_layers, static_cast<int64_t>(rows.size()), config_.num_kv_heads,
                   longest + max_generated + max_window + 1, config_.head_dim, dtype(), device());
  next_position_.assign(rows.size(), 0);
  pending_valid_.clear();
  pending_root_embedding_.assign(rows.size(), at::Tensor());
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowPrompt& row = rows[r];
    if (row.tokens.empty()) throw std::invalid_argument("transformer: a prompt row has no tokens");
    const int64_t n = static_cast<int64_t>(row.tokens.size()) - 1;  // the last token is the first root
    if (n > 0) {
      const at::Tensor tokens =
          at::tensor(std::vector<int64_t>(row.tokens.begin(), row.tokens.end() - 1)).unsqueeze(0).to(device());
      const at::Tensor positions =
          at::tensor(std::vector<int64_t>(row.positions.begin(), row.positions.end() - 1)).unsqueeze(0).to(device());
      const at::Tensor causal = at::ones({n, n}, at::kBool).tril();
      // Prompt keys may be masked out for later queries, but each slot sees itself.
      std::vector<uint8_t> valid(row.key_valid.begin(), row.key_valid.end() - 1);
      at::Tensor mask = causal.clone();
      for (int64_t j = 0; j < n; ++j) {
        if (!valid[static_cast<size_t>(j)]) mask.select(1, j).fill_(false);
      }
      mask.diagonal().fill_(true);
      const at::Tensor hidden = row.embeddings.defined()
                                    ? row.embeddings.narrow(0, 0, n).unsqueeze(0).to(device(), dtype())
                                    : embed(tokens);
      forward_hidden({static_cast<int64_t>(r)}, hidden, positions, mask.to(device()));
      std::vector<int64_t> kept(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) kept[static_cast<size_t>(j)] = j;
      cache_.commit_row(static_cast<int64_t>(r), kept, valid);
    }
    next_position_[r] = row.positions.back();
    if (row.embeddings.defined()) pending_root_embedding_[r] = row.embeddings[n].to(device(), dtype());
    pending_valid_.push_back(row.key_valid.back());
  }
}

at::Tensor Transformer::forward(const std::vector<int64_t>& roots, const DraftTree& nodes) {
  return window_logits(roots, nodes).to(at::kCPU);  // a no-op for a CPU model
}

at::Tensor Transformer::window_logits(const std::vector<int64_t>& roots, const DraftTree& nodes) {
  const int64_t rows = cache_.rows();
  const int64_t width = 1 + static_cast<int64_t>(nodes.size());
  std::vector<int64_t> row_ids(static_cast<size_t>(rows));
  at::Tensor tokens = at::empty({rows, width}, at::kLong);
  at::Tensor positions = at::empty({rows, width}, at::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    row_ids[static_cast<size_t>(r)] = r;
    tokens[r][0] = roots[static_cast<size_t>(r)];
    positions[r][0] = next_position_[static_cast<size_t>(r)];
    for (size_t i = 0; i < nodes.size(); ++i) {
      tokens[r][static_cast<int64_t>(i) + 1] = nodes.tokens[i];
      positions[r][static_cast<int64_t>(i) + 1] = next_position_[static_cast<size_t>(r)] + nodes.depth[i];
    }
  }
  // Window mask: slot 0 is the root; node i attends to the root, its ancestors and itself.
  at::Tensor mask = at::zeros({width, width}, at::kBool);
  auto m = mask.accessor<bool, 2>();
  m[0][0] = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t slot = static_cast<int64_t>(i) + 1;
    m[slot][0] = true;
    for (int a = static_cast<int>(i); a >= 0; a = nodes.parent[static_cast<size_t>(a)]) m[slot][a + 1] = true;
  }
  // Per row: a root whose key is masked (a placeholder root, e.g. Lumina's
  // unconditional row) is invisible to the draft nodes too.
  mask = mask.unsqueeze(0).repeat({rows, 1, 1});
  for (int64_t r = 0; r < rows; ++r) {
    if (!pending_valid_[static_cast<size_t>(r)]) mask[r].narrow(0, 1, width - 1).select(1, 0).fill_(false);
  }
  at::Tensor hidden = embed(tokens.to(device()));
  for (int64_t r = 0; r < rows; ++r) {  // a root that is still a prompt embedding (LlamaGen's last caption slot)
    const at::Tensor& root = pending_root_embedding_[static_cast<size_t>(r)];
    if (root.defined()) hidden[r][0].copy_(root);
  }
  return forward_hidden(row_ids, hidden, positions.to(device()), mask.to(device()));
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

at::Tensor Transformer::attention(int64_t layer, const std::vector<int64_t>& rows, const at::Tensor& h,
                                  const at::Tensor& positions, const at::Tensor& window_mask) {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const int64_t width = h.size(1);
  const int64_t heads = config_.num_heads;
  const int64_t kv_heads = config_.num_kv_heads;
  const int64_t dim = config_.head_dim;
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i];
    const at::Tensor x = h[static_cast<int64_t>(i)];  // [W, H]
    at::Tensor q = project(x, w.q).view({width, heads, dim});
    at::Tensor k = project(x, w.k).view({width, kv_heads, dim});
    const at::Tensor v = project(x, w.v).view({width, kv_heads, dim});
    if (config_.qk_norm) {
      q = head_layer_norm(q, w.q_norm_w, w.q_norm_b, config_.qk_norm_eps);
      k = head_layer_norm(k, w.k_norm_w, w.k_norm_b, config_.qk_norm_eps);
    }
    const at::Tensor pos = positions[static_cast<int64_t>(i)];
    q = apply_rope(q, pos, config_);
    k = apply_rope(k, pos, config_);
    cache_.write(layer, r, k.transpose(0, 1), v.transpose(0, 1));
    const int64_t committed = cache_.length(r);
    at::Tensor keys = cache_.keys(layer, r, width);     // [kv_heads, committed + W, D]
    at::Tensor values = cache_.values(layer, r, width);
    if (kv_heads != heads) {
      keys = keys.repeat_interleave(heads / kv_heads, 0);
      values = values.repeat_interleave(heads / kv_heads, 0);
    }
    // Mask [W, committed + W]: committed keys by their validity, window keys by the tree.
    const at::Tensor mask =
        at::cat({cache_.key_valid(r).unsqueeze(0).expand({width, committed}),
                 window_mask.dim() == 3 ? window_mask[static_cast<int64_t>(i)] : window_mask},
                1);
    if (!x.is_cpu()) {
      // GPU: the fused attention kernel with the explicit boolean mask (true: may attend).
      const at::Tensor out = at::scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), keys.unsqueeze(0),
                                                              values.unsqueeze(0), mask);
      outputs.push_back(out.squeeze(0).transpose(0, 1).reshape({width, heads * dim}));
      continue;
    }
    // CPU: the exact math path the CPU tests' tolerances were set against.
    const at::Tensor scores =
        at::matmul(q.transpose(0, 1), keys.transpose(1, 2)) / std::sqrt(static_cast<double>(dim));  // [heads, W, S]
    const at::Tensor probs = at::softmax(scores.to(at::kFloat).masked_fill(mask.logical_not(), -INFINITY), -1);
    const at::Tensor out = at::matmul(probs.to(values.scalar_type()), values);  // [heads, W, D]
    outputs.push_back(out.transpose(0, 1).reshape({width, heads * dim}));
  }
  return project(at::stack(outputs), w.o);
}

at::Tensor Transformer::forward_hidden(const std::vector<int64_t>& rows, const at::Tensor& hidden,
                                       const at::Tensor& positions, const at::Tensor& window_mask) {
  c10::InferenceMode inference_mode;  // no autograd bookkeeping
  at::Tensor x = hidden;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    x = x + attention(l, rows, rms_norm(x, w.attn_norm, config_.norm_eps), positions, window_mask);
    const at::Tensor h = rms_norm(x, w.mlp_norm, config_.norm_eps);
    x = x + project(at::silu(project(h, w.gate)) * project(h, w.up), w.down);
  }
  return project(rms_norm(x, weights_.norm, config_.norm_eps), weights_.lm_head).to(at::kFloat);
}

}  // namespace sjd::model
