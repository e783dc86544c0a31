#include "table_model.h"

#include <cmath>

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

void TableModel::start(const std::vector<model::RowPrompt>& rows, int64_t, int64_t) {
  rows_ = static_cast<int64_t>(rows.size());
  history_.clear();
  started_ = false;
}

std::vector<float> TableModel::logits(int64_t row, const std::vector<int64_t>& prefix) const {
  std::vector<float> out(static_cast<size_t>(spec_.vocab));
  const int64_t last = prefix.empty() ? -1 : prefix.back();
  for (int64_t v = 0; v < spec_.vocab; ++v) {
    const double markov = hashed_unit(spec_.salt + 17 * row, static_cast<uint64_t>(last + 1), static_cast<uint64_t>(v));
    const double context = hashed_unit(spec_.salt + 17 * row + 5, prefix_hash(prefix), static_cast<uint64_t>(v));
    out[static_cast<size_t>(v)] = static_cast<float>(spec_.markov_scale * markov + spec_.context_scale * context);
  }
  return out;
}

at::Tensor TableModel::forward(const std::vector<int64_t>& roots, const model::DraftTree& nodes) {
  ++forward_calls;
  last_nodes_ = nodes;
  last_root_ = roots[0];
  std::vector<int64_t> base = history_;
  if (started_) base.push_back(roots[0]);
  const int64_t slots = 1 + static_cast<int64_t>(nodes.size());
  std::vector<float> out(static_cast<size_t>(rows_ * slots * spec_.vocab));
  for (int64_t slot = 0; slot < slots; ++slot) {
    std::vector<int64_t> path;
    for (int a = static_cast<int>(slot) - 1; a >= 0; a = nodes.parent[static_cast<size_t>(a)]) {
      path.insert(path.begin(), nodes.tokens[static_cast<size_t>(a)]);
    }
    std::vector<int64_t> prefix = base;
    prefix.insert(prefix.end(), path.begin(), path.end());
    for (int64_t r = 0; r < rows_; ++r) {
      const std::vector<float> l = logits(r, prefix);
      std::copy(l.begin(), l.end(), out.begin() + (r * slots + slot) * spec_.vocab);
    }
  }
  return at::tensor(out).view({rows_, slots, spec_.vocab});
}

void TableModel::commit(const std::vector<int>& path) {
  if (started_) history_.push_back(last_root_);
  for (int node : path) history_.push_back(last_nodes_.tokens[static_cast<size_t>(node)]);
  started_ = true;
}

family::TokenLayout small_layout(int64_t vocab) {
  return family::TokenLayout(vocab, {-1, -1, 4, -1, -1, 4}, 2, 2, 1, 3);
}

std::vector<model::RowPrompt> table_rows(bool cfg) {
  std::vector<model::RowPrompt> rows(1);
  rows[0].tokens = {0};
  rows[0].positions = {0};
  rows[0].key_valid = {1};
  if (cfg) rows.push_back(rows[0]);
  return rows;
}

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
