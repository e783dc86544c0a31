#include "decoding/run_stats.h"

#include <nlohmann/json.hpp>

namespace sjd::decoding {

void RunStats::record_step(int64_t first_position, int64_t committed) {
  if (static_cast<int64_t>(accepted_histogram.size()) <= committed) {
    accepted_histogram.resize(static_cast<size_t>(committed) + 1, 0);
  }
  ++accepted_histogram[static_cast<size_t>(committed)];
  committed_at_step.resize(static_cast<size_t>(first_position + committed), steps);
  ++steps;
  tokens += committed;
}

void RunStats::record_window(int chain, int tree_k, int tree_depth) {
  chain_at_step.push_back(chain);
  if (tree_k > 1 && tree_depth > 0) {
    tree_k_sum += tree_k;
    tree_depth_sum += tree_depth;
  }
}

double RunStats::mean_chain() const {
  double sum = 0.0;
  for (int c : chain_at_step) sum += c;
  return chain_at_step.empty() ? 0.0 : sum / static_cast<double>(chain_at_step.size());
}

double RunStats::mean_tree_k() const { return tree_windows > 0 ? double(tree_k_sum) / tree_windows : 0.0; }

double RunStats::mean_tree_depth() const { return tree_windows > 0 ? double(tree_depth_sum) / tree_windows : 0.0; }

nlohmann::json to_json(const RunStats& s) {
  const bool planned = !s.window_prior.empty();  // automatic windows chose the shapes
  nlohmann::json by_age = nlohmann::json::array();
  for (size_t age = 0; age < s.drafts_by_age.size(); ++age) {
    const auto [tested, accepted] = s.drafts_by_age[age];
    if (tested == 0) continue;
    const bool last = age + 1 == s.drafts_by_age.size();
    by_age.push_back({{"age", last ? std::to_string(age) + "+" : std::to_string(age)},
                      {"tested", tested},
                      {"accepted", accepted},
                      {"rate", static_cast<double>(accepted) / static_cast<double>(tested)}});
  }
  return {{"steps", s.steps},
          {"tokens", s.tokens},
          {"step_compression", s.step_compression()},
          {"mean_accepted_length", s.step_compression()},
          {"accepted_length_histogram", s.accepted_histogram},
          {"tree_windows", s.tree_windows},
          {"sibling_accepts", s.sibling_accepts},
          {"committed_at_step", s.committed_at_step},
          {"verifier", s.verifier},
          {"windows", {{"mean_chain", s.mean_chain()},
                       {"mean_tree_k", s.mean_tree_k()},
                       {"mean_tree_depth", s.mean_tree_depth()},
                       {"chain_at_step", s.chain_at_step},
                       {"drafts_by_age", by_age},
                       {"prior_by_age", planned ? nlohmann::json(s.window_prior) : nlohmann::json()},
                       {"learning", planned ? nlohmann::json(s.window_learning) : nlohmann::json()},
                       {"cost_profile", planned ? nlohmann::json(s.cost_profile) : nlohmann::json()}}},
          {"seconds", {{"prefill", s.prefill_seconds},
                       {"forward", s.forward_seconds},
                       {"pipeline", s.pipeline_seconds},
                       {"verify", s.verify_seconds}}}};
}

}  // namespace sjd::decoding
