#pragma once
// A table-driven conditional model behind the TokenModel interface: logits are
// a fixed function of (row, generated prefix), so the exact autoregressive
// distribution of whole sequences can be enumerated and compared with what the
// decoding methods sample.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "decoding/decoder.h"
#include "family/token_layout.h"
#include "model/token_model.h"

namespace sjd::testing {

struct TableModelSpec {
  int64_t vocab = 6;
  double markov_scale = 2.5;   // strength of the dependence on the previous token
  double context_scale = 0.8;  // strength of the dependence on the whole prefix
  uint64_t salt = 1;
  // A broken variant: each row's logits also depend on the first window of the
  // forward (what a batching bug that mixes rows would do).
  bool leak_across_batch = false;
  // A broken model: when set, token 2's logit of every role-1 row (prompt 0's unconditional row) is this
  // value (NaN or inf: logits that are not finite).
  std::optional<float> poisoned_logit;
};

// Each cache row's logits depend on its role and its generated prefix; the role
// comes from the row's prompt (role_of), so CFG rows and different prompts differ.
class TableModel : public model::TokenModel {
 public:
  explicit TableModel(TableModelSpec spec) : spec_(spec) {}
  int64_t vocab_size() const override { return spec_.vocab; }
  void reserve(int64_t rows, int64_t, int64_t) override;
  void open_row(int64_t row, const model::RowPrompt& prompt) override;
  at::Tensor forward_rows(const std::vector<model::RowWindow>& windows) override;
  void commit_rows(const std::vector<model::RowPath>& paths) override;

  // Logits of a row with this role given the generated prefix.
  std::vector<float> logits(int64_t role, const std::vector<int64_t>& prefix) const;
  // The role of a prompt: table_rows gives the conditional row role 0 and the unconditional row role 1.
  static int64_t role_of(const model::RowPrompt& prompt);
  int64_t forward_calls = 0;

 private:
  struct Row {
    int64_t role = 0;
    std::vector<int64_t> history;  // committed generated tokens in the "cache"
    bool started = false;          // the root is a generated token (after the first commit)
    model::DraftTree last_nodes;
    int64_t last_root = -1;
  };
  TableModelSpec spec_;
  std::vector<Row> rows_;
};

// The small layout of the tests: a 2x2 grid of image tokens 1..3, each row
// ended by a forced newline token 4 (like Lumina-mGPT's rows), 6 tokens.
family::TokenLayout small_layout(int64_t vocab = 6);

// Exact probability of every complete sequence under AR sampling with the
// same logits pipeline (enumerated), for rows of roles 0 .. rows-1.
std::map<std::vector<int64_t>, double> exact_distribution(const TableModel& model, const family::TokenLayout& layout,
                                                          const sampling::PipelineSettings& pipeline, int64_t rows);

// Runs `decode` with seeds 0..runs-1 and counts the sequences.
std::map<std::vector<int64_t>, long> sample_sequences(TableModel& model, const family::TokenLayout& layout,
                                                      decoding::DecodeRequest request, int runs,
                                                      const decoding::Mutants& mutants = {},
                                                      double* mean_steps = nullptr);

// Request rows for the table model: one conditional row, plus an unconditional one for CFG;
// `prompt` (> 0) gives another prompt: other roles and a longer prompt.
std::vector<model::RowPrompt> table_rows(bool cfg, int prompt = 0);

// A request for the table model: `method` (its window if speculative), the draft init, CFG at scale 2
// over table_rows (or none) and top-k (0 = all tokens); callers set what else their case needs.
decoding::DecodeRequest table_request(const std::string& method, int window, const std::string& init, bool cfg,
                                      int64_t top_k);

}  // namespace sjd::testing
