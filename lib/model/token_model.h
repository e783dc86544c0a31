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

// One row's part of a window step. The rows of one sequence (its CFG rows)
// share one draft tree; the rows of different sequences (a batch) each have their own.
struct RowWindow {
  int64_t row = 0;                   // cache row
  int64_t root = 0;                  // the row's last committed token (at first: its last prompt token)
  const DraftTree* nodes = nullptr;  // the draft nodes after the root
};

// What one row keeps of its last window: the root and the nodes `path` (a chain from depth 1 down).
struct RowPath {
  int64_t row = 0;                         // cache row
  const std::vector<int>* path = nullptr;  // node indices of the row's last window
};

// Every row of `roots` (row r has root roots[r]) with the same draft nodes.
std::vector<RowWindow> shared_window(const std::vector<int64_t>& roots, const DraftTree& nodes);

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual int64_t vocab_size() const = 0;
  // Where forward_rows leaves its logits.
  virtual at::Device device() const { return at::kCPU; }

  // Makes room for `rows` cache rows, each holding at least `tokens_per_row`
  // slots (prompt, generated tokens and one window) at positions below
  // `position_limit`. Every row is empty afterwards.
  virtual void reserve(int64_t rows, int64_t tokens_per_row, int64_t position_limit) = 0;
  // Cache slots a window of `width` (root and nodes) takes after a row's committed tokens: its width,
  // or more where a model pads it (a GPU's graphed step, model/step_graphs.h). A reservation whose
  // tail is this much keeps every window of that width at its fast path up to the image's end.
  virtual int64_t window_slots(int64_t width) const { return width; }

  // Empties cache row `row` and feeds every prompt token but the last (the
  // last one becomes the root of the row's first window). Other rows keep
  // their state: a batch refills a finished row while the others go on.
  virtual void open_row(int64_t row, const RowPrompt& prompt) = 0;

  // Logits [windows, 1 + widest window's nodes, V] (float32, on the model's device): for
  // window w, slot 0 predicts the token after its root and slot 1 + i the
  // token after node i, each conditioned on that row's committed prefix, the
  // root and node i's ancestors. Slots past a window's own nodes are padding
  // and hold unspecified values.
  virtual at::Tensor forward_rows(const std::vector<RowWindow>& windows) = 0;

  // Keeps each named row's root and path of its last window; everything else of
  // those windows is dropped. One call per step for all rows (a row at most once),
  // so a model can move the kept keys of every row together.
  virtual void commit_rows(const std::vector<RowPath>& paths) = 0;

  // The token ids any slot may emit (image codes and structure tokens): a model
  // may compute logits for these only, the rest being masked by the pipeline
  // anyway. Empty: every token. Models without a restricted head ignore it.
  virtual void restrict_outputs(const std::vector<int64_t>& token_ids) {}
  // The ids a restricted head computes logits for (every other logit is the lowest float), ascending
  // as given; empty when the model computes every token's.
  virtual const std::vector<int64_t>& output_ids() const {
    static const std::vector<int64_t> every_token;
    return every_token;
  }

  // One sequence (all rows share each window) -- what the bench, the
  // calibration and `inspect` drive (the decode loop, one sequence or many,
  // goes through reserve / open_row / commit_rows): reserve and open rows 0 .. rows.size() - 1 with
  // room for max_generated tokens and windows of up to max_window nodes ...
  void start(const std::vector<RowPrompt>& rows, int64_t max_generated, int64_t max_window);
  // ... logits [rows, 1 + nodes, V] of one shared window ...
  at::Tensor forward(const std::vector<int64_t>& roots, const DraftTree& nodes);
  // ... and keep its path in every row.
  void commit(const std::vector<int>& path);

 private:
  int64_t started_rows_ = 0;
};

}  // namespace sjd::model
