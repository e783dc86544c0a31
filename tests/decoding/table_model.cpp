#include "table_model.h"

#include <cmath>
#include <stdexcept>

#include "sampling/philox.h"

namespace sjd::testing {
namespace {

// A deterministic value in [-1, 1) for a hashed key.
double hashed_unit(uint64_t salt, uint64_t a, uint64_t b) {
  sampling::RngKey key;
  key.seed = salt;
  key.position = static_cast<uint32_t>(a);
  key.step = static_cast<uint32_t>(a >> 32);
  key.sub = static_cast<uint32_t>(b & 0xff);
  key.sequence = static_cast<uint32_t>(b >> 8);
  return 2.0 * sampling::uniform01(key, 0) - 1.0;
}

uint64_t prefix_hash(const std::vector<int64_t>& prefix) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
  return h ^ prefix.size();
}

}  // namespace

void TableModel::reserve(int64_t rows, int64_t, int64_t) { rows_.assign(static_cast<size_t>(rows), Row{}); }

int64_t TableModel::role_of(const model::RowPrompt& prompt) {
  return prompt.tokens.front() + 7 * (static_cast<int64_t>(prompt.tokens.size()) - 1);
}

void TableModel::open_row(int64_t row, const model::RowPrompt& prompt) {
  rows_.at(static_cast<size_t>(row)) = Row{};
  rows_[static_cast<size_t>(row)].role = role_of(prompt);
}

std::vector<float> TableModel::logits(int64_t role, const std::vector<int64_t>& prefix) const {
  std::vector<float> out(static_cast<size_t>(spec_.vocab));
  const int64_t last = prefix.empty() ? -1 : prefix.back();
  for (int64_t v = 0; v < spec_.vocab; ++v) {
    const double markov = hashed_unit(spec_.salt + 17 * role, static_cast<uint64_t>(last + 1), static_cast<uint64_t>(v));
    const double context = hashed_unit(spec_.salt + 17 * role + 5, prefix_hash(prefix), static_cast<uint64_t>(v));
    out[static_cast<size_t>(v)] = static_cast<float>(spec_.markov_scale * markov + spec_.context_scale * context);
  }
  return out;
}

at::Tensor TableModel::forward_rows(const std::vector<model::RowWindow>& windows) {
  ++forward_calls;
  size_t width = 1;
  for (const auto& w : windows) width = std::max(width, 1 + w.nodes->size());
  const int64_t slots = static_cast<int64_t>(width);
  std::vector<float> out(windows.size() * width * static_cast<size_t>(spec_.vocab), 0.0f);
  for (size_t i = 0; i < windows.size(); ++i) {
    Row& row = rows_.at(static_cast<size_t>(windows[i].row));
    const model::DraftTree& nodes = *windows[i].nodes;
    row.last_nodes = nodes;
    row.last_root = windows[i].root;
    std::vector<int64_t> base = row.history;
    if (row.started) base.push_back(windows[i].root);
    for (int64_t slot = 0; slot <= static_cast<int64_t>(nodes.size()); ++slot) {
      std::vector<int64_t> prefix = base;
      std::vector<int64_t> path;
      for (int a = static_cast<int>(slot) - 1; a >= 0; a = nodes.parent[static_cast<size_t>(a)]) {
        path.insert(path.begin(), nodes.tokens[static_cast<size_t>(a)]);
      }
      prefix.insert(prefix.end(), path.begin(), path.end());
      std::vector<float> l = logits(row.role, prefix);
      if (spec_.leak_across_batch && i > 0) l[1] += 2.0f + static_cast<float>(windows[0].root);
      if (spec_.poisoned_logit && row.role == 1) l[2] = *spec_.poisoned_logit;
      std::copy(l.begin(), l.end(), out.begin() + (static_cast<int64_t>(i) * slots + slot) * spec_.vocab);
    }
  }
  return at::tensor(out).view({static_cast<int64_t>(windows.size()), slots, spec_.vocab});
}

void TableModel::commit_rows(const std::vector<model::RowPath>& paths) {
  std::vector<uint8_t> seen(rows_.size(), 0);
  for (const model::RowPath& p : paths) {  // the transformer's KV cache refuses a row twice: so does the table
    if (seen.at(static_cast<size_t>(p.row))++) throw std::invalid_argument("table model: a row committed twice");
  }
  for (const model::RowPath& p : paths) {
    Row& row = rows_.at(static_cast<size_t>(p.row));
    if (row.started) row.history.push_back(row.last_root);
    for (int node : *p.path) row.history.push_back(row.last_nodes.tokens[static_cast<size_t>(node)]);
    row.started = true;
  }
}

family::TokenLayout small_layout(int64_t vocab) {
  return family::TokenLayout(vocab, {-1, -1, 4, -1, -1, 4}, 2, 2, 1, 3);
}

std::vector<model::RowPrompt> table_rows(bool cfg, int prompt) {
  std::vector<model::RowPrompt> rows(cfg ? 2 : 1);
  for (size_t r = 0; r < rows.size(); ++r) {
    // Prompt 0: roles 0 and 1. Prompt n: n + 1 tokens starting with 2n + r.
    const int64_t length = prompt + 1;
    rows[r].tokens.assign(static_cast<size_t>(length), 0);
    rows[r].tokens[0] = 2 * prompt + static_cast<int64_t>(r);
    for (int64_t i = 0; i < length; ++i) rows[r].positions.push_back(i);
    rows[r].key_valid.assign(static_cast<size_t>(length), 1);
  }
  return rows;
}

decoding::DecodeRequest table_request(const std::string& method, int window, const std::string& init, bool cfg,
                                      int64_t top_k) {
  decoding::DecodeRequest r;
  r.method = decoding::make_method(method);
  if (r.method.speculative()) r.method.window = window;
  r.method.init = decoding::parse_init_scheme(init);
  r.rows = table_rows(cfg);
  r.pipeline.cfg_scale = cfg ? 2.0 : 1.0;
  r.pipeline.top_k = top_k;
  return r;
}

// The AR law through the same logits pipeline the decoders use: these tests judge the decoding loop, and the
// pipeline's own law (guidance, masks, temperature and top-k together) is held against a loop in doubles in
// tests/sampling/test_logits_pipeline.cpp.
std::map<std::vector<int64_t>, double> exact_distribution(const TableModel& model, const family::TokenLayout& layout,
                                                          const sampling::PipelineSettings& pipeline, int64_t rows) {
  std::map<std::vector<int64_t>, double> out;
  std::vector<std::pair<std::vector<int64_t>, double>> frontier = {{{}, 1.0}};
  for (int64_t t = 0; t < layout.length(); ++t) {
    std::vector<std::pair<std::vector<int64_t>, double>> next;
    for (const auto& [prefix, mass] : frontier) {
      at::Tensor logits = at::empty({rows, 1, model.vocab_size()}, at::kFloat);
      for (int64_t r = 0; r < rows; ++r) {
        const auto l = model.logits(r, prefix);
        for (int64_t v = 0; v < model.vocab_size(); ++v) logits[r][0][v] = l[static_cast<size_t>(v)];
      }
      const at::Tensor p = sampling::run_logits_pipeline(logits, {layout.constraint(t)}, pipeline)[0];
      for (int64_t v = 0; v < model.vocab_size(); ++v) {
        const double pv = p[v].item<double>();
        if (pv <= 0.0) continue;
        auto extended = prefix;
        extended.push_back(v);
        next.emplace_back(std::move(extended), mass * pv);
      }
    }
    frontier = std::move(next);
  }
  for (auto& [seq, mass] : frontier) out[seq] = mass;
  return out;
}

std::map<std::vector<int64_t>, long> sample_sequences(TableModel& model, const family::TokenLayout& layout,
                                                      decoding::DecodeRequest request, int runs,
                                                      const decoding::Mutants& mutants, double* mean_steps) {
  std::map<std::vector<int64_t>, long> counts;
  double steps = 0.0;
  for (int seed = 0; seed < runs; ++seed) {
    request.seed = static_cast<uint64_t>(seed);
    const auto result = decoding::decode(model, layout, request, mutants);
    ++counts[result.tokens];
    steps += static_cast<double>(result.stats.steps);
  }
  if (mean_steps) *mean_steps = steps / runs;
  return counts;
}

}  // namespace sjd::testing
