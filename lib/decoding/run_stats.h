#pragma once
// What one generation run measured: steps (target forward passes after
// prefill), tokens, accepted-length histogram, the step that committed each
// generated position, and where the time went.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sjd::decoding {

struct RunStats {
  int64_t steps = 0;
  int64_t tokens = 0;
  std::vector<int64_t> accepted_histogram;  // [n] = steps that committed n tokens
  std::vector<int64_t> committed_at_step;   // per generated index
  int64_t tree_windows = 0;     // sjd-pac windows that held a proactive draft tree
  int64_t sibling_accepts = 0;  // tree levels won by a candidate other than the spine's
  std::vector<int> chain_at_step;  // the window's chain length L of every step
  int64_t tree_k_sum = 0;          // over tree windows: candidates per level, and levels
  int64_t tree_depth_sum = 0;
  std::string cost_profile;        // the step-cost profile automatic windows read
                                   // (StepCostProfile::summary); else empty
  // Automatic windows only (empty otherwise): the acceptance the planner assumed by draft age (0, 1, 2+),
  // and whether it followed the image's outcomes (batch of one) or planned from the prior alone.
  std::vector<double> window_prior;
  bool window_learning = true;
  // [age bin]: chain drafts tested and accepted by draft age (windows that had computed p for the position;
  // the last bin holds the older ones), from the window planner. Forced tokens and tree levels are not in it.
  std::vector<std::pair<int64_t, int64_t>> drafts_by_age;
  std::string verifier = "cpu";    // where the windows were verified: "cpu", or the GPU's name ("cuda:0")
  double prefill_seconds = 0.0;
  double forward_seconds = 0.0;
  double pipeline_seconds = 0.0;
  double verify_seconds = 0.0;

  double step_compression() const { return steps > 0 ? static_cast<double>(tokens) / steps : 0.0; }
  void record_step(int64_t first_position, int64_t committed);
  void record_window(int chain, int tree_k, int tree_depth);
  double mean_chain() const;
  double mean_tree_k() const;      // over tree windows
  double mean_tree_depth() const;
};

nlohmann::json to_json(const RunStats& stats);

}  // namespace sjd::decoding
