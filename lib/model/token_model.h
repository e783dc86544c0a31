#pragma once
// What the decoding loop needs from a model: start rows from their prompts,
// score a window (a root token per row plus a tree of draft nodes shared by
// all rows), and keep the accepted path. The LLaMA-family transformer and the
// tests' table-driven models both implement it.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace sjd::model {

// One row of the batch (the conditional prompt, or the unconditional CFG row).
struct RowPrompt {
  std::vector<int64_t> tokens;      // at least one token
  std::vector<int64_t> positions;   // RoPE position of each prompt token
  std::vector<uint8_t> key_valid;   // 0: later tokens must not attend to this slot
  // Optional [tokens, hidden] input vectors used instead of the token embeddings
  // (LlamaGen's projected caption); the last row is the first window's root.
  at::Tensor embeddings;
};
// Generated token t of a row sits at position positions.back() + 1 + t.

// Draft nodes of one window; node i sits at depth[i] >= 1 below the root (the
// row's last committed token) and its parent is node parent[i], or -1 for the
// root. A chain has parent[i] = i - 1. Nodes are in topological order.
struct DraftTree {
  std::vector<int64_t> tokens;
  std::vector<int> parent;
  std::vector<int> depth;

  size_t size() const { return tokens.size(); }
  void clear() { tokens.clear(); parent.clear(); depth.clear(); }
  void push(int64_t token, int parent_index) {
    tokens.push_back(token);
    parent.push_back(parent_index);
    depth.push_back(parent_index < 0 ? 1 : depth[static_cast<size_t>(parent_index)] + 1);
  }
};

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual int64_t vocab_size() const = 0;

  // Begins a new batch: feeds every prompt token but the last of each row (the
  // last one becomes the root of the first window). Room is reserved for
  // max_generated tokens and windows of up to max_window draft nodes.
  virtual void start(const std::vector<RowPrompt>& rows, int64_t max_generated, int64_t max_window) = 0;

  // Logits [rows, 1 + nodes, V] (float32): slot 0 predicts the token after the
  // root, slot 1 + i the token after node i, each conditioned on the committed
  // prefix, the root and node i's ancestors.
  virtual at::Tensor forward(const std::vector<int64_t>& roots, const DraftTree& nodes) = 0;

  // Keeps the root and the nodes `path` (a chain from depth 1 down) of the last
  // forward; everything else of that window is dropped.
  virtual void commit(const std::vector<int>& path) = 0;

  // The token ids any slot may emit (image codes and structure tokens): a model
  // may compute logits for these only, the rest being masked by the pipeline
  // anyway. Empty: every token. Models without a restricted head ignore it.
  virtual void restrict_outputs(const std::vector<int64_t>& token_ids) {}
};

}  // namespace sjd::model
