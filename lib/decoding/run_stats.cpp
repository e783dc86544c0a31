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

nlohmann::json to_json(const RunStats& s) {
  return {{"steps", s.steps},
          {"tokens", s.tokens},
          {"step_compression", s.step_compression()},
          {"mean_accepted_length", s.step_compression()},
          {"accepted_length_histogram", s.accepted_histogram},
          {"tree_windows", s.tree_windows},
          {"sibling_accepts", s.sibling_accepts},
          {"committed_at_step", s.committed_at_step},
          {"seconds", {{"prefill", s.prefill_seconds},
                       {"forward", s.forward_seconds},
                       {"pipeline", s.pipeline_seconds},
                       {"verify", s.verify_seconds}}}};
}

}  // namespace sjd::decoding
