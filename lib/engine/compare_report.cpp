// The compare report as text (the table `sjd compare` prints) and as compare.json.
#include <algorithm>
#include <iomanip>
#include <sstream>

#include "engine/compare.h"
#include "engine/settings.h"

namespace sjd::engine {
namespace {

std::string format_fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

// "1.23x", or "-" when there was no ar row to compare with.
std::string ratio(double value, const char* unit) {
  return value <= 0.0 ? "-" : format_fixed(value, 2) + unit;
}

// The same ratio for compare.json: null without an ar row, where 0 would read as "0x as fast".
nlohmann::json ratio_or_null(double value) { return value > 0.0 ? nlohmann::json(value) : nlohmann::json(); }

// The base settings that method entry `entry` does not read (a --window beside ar), so that a reader of
// compare.json does not take them for part of its runs. The batch size stays: it times every run.
nlohmann::json base_settings_without_effect(const nlohmann::json& base_json, const GenerationSettings& base,
                                            const std::string& entry) {
  nlohmann::json keys = nlohmann::json::array();
  for (const std::string& key : keys_without_effect(compare_settings(base, entry))) {
    if (key != "batch_size" && base_json.contains(key)) keys.push_back(key);
  }
  return keys;
}

}  // namespace

std::string format_table(const CompareReport& report) {
  size_t name_width = 8;
  for (const auto& r : report.rows) name_width = std::max(name_width, r.method.size() + 2);
  const int w = static_cast<int>(name_width);
  std::ostringstream out;
  // Step compression next to wall-clock: on a CPU a window is paid for in compute, so the
  // ratio of the two (speed-up per unit of compression) says what the windows cost.
  out << std::left << std::setw(w) << "method" << std::setw(11) << "exactness" << std::right << std::setw(8) << "steps"
      << std::setw(12) << "compression" << std::setw(7) << "L" << std::setw(9) << "KxD" << std::setw(10) << "decode s"
      << std::setw(10) << "speed-up" << std::setw(9) << "image s" << std::setw(10) << "speed-up" << std::setw(12)
      << "per compr." << "\n";
  out << std::fixed;
  for (const auto& r : report.rows) {
    std::ostringstream tree;
    tree << std::fixed << std::setprecision(1);
    if (r.mean_tree_k > 0.0) tree << r.mean_tree_k << "x" << r.mean_tree_depth; else tree << "-";
    out << std::left << std::setw(w) << r.method << std::setw(11) << (r.lossless ? r.exactness : "LOSSY") << std::right
        << std::setprecision(1) << std::setw(8) << r.steps << std::setprecision(2) << std::setw(11)
        << r.step_compression << "x" << std::setprecision(1) << std::setw(7)
        << (r.mean_chain > 0.0 ? format_fixed(r.mean_chain, 1) : "-") << std::setw(9)
        << tree.str() << std::setprecision(3) << std::setw(10) << r.decode_seconds << std::setw(10)
        << ratio(r.decode_speedup, "x") << std::setprecision(3) << std::setw(9) << r.seconds << std::setw(10)
        << ratio(r.speedup, "x") << std::setw(12)
        << ratio(r.step_compression > 0 ? r.decode_speedup / r.step_compression : 0.0, "") << "\n";
  }
  // The speed-ups are ratios of means: one run slowed by other work on the machine moves them, so say so.
  constexpr double kWideSpread = 1.5;
  for (const auto& r : report.rows) {
    if (r.runs < 2 || r.seconds_max <= kWideSpread * r.seconds_min) continue;
    out << std::setprecision(2) << "note: " << r.entry << "'s runs took " << r.seconds_min << " to " << r.seconds_max
        << " s each: the machine's load varied, and the speed-ups are ratios of means (each run's seconds are in "
           "compare.json)\n";
  }
  return out.str();
}

nlohmann::json to_json(const CompareReport& report, const CompareOptions& options) {
  // The settings every method runs with; the method and its relaxation come from each --methods entry, so
  // the base's (a bundle default compare does not use) would mislead.
  nlohmann::json settings = settings_to_json(options.base);
  // The batch size the runs were decoded with ("auto" is one run at a time), as each run's record has it.
  settings["batch_size"] = compare_batch_size(options.base);
  settings.erase("method");
  settings.erase("relax");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : report.rows) {
    rows.push_back({{"entry", r.entry},
                    {"settings_without_effect", base_settings_without_effect(settings, options.base, r.entry)},
                    {"method", r.method},
                    {"lossless", r.lossless},
                    {"exactness", r.exactness},
                    {"runs", r.runs},
                    {"steps", r.steps},
                    {"step_compression", r.step_compression},
                    {"mean_accepted_drafts", r.accepted_drafts},
                    {"accepted_length_share", r.accepted_share},
                    {"decode_seconds", r.decode_seconds},
                    {"seconds", r.seconds},
                    {"seconds_min", r.seconds_min},
                    {"seconds_max", r.seconds_max},
                    {"decode_speedup_vs_ar", ratio_or_null(r.decode_speedup)},
                    {"speedup_vs_ar", ratio_or_null(r.speedup)},
                    {"decode_speedup_per_compression",
                     ratio_or_null(r.step_compression > 0 ? r.decode_speedup / r.step_compression : 0.0)},
                    {"mean_chain", r.mean_chain},
                    {"mean_tree_k", r.mean_tree_k},
                    {"mean_tree_depth", r.mean_tree_depth}});
  }
  nlohmann::json runs = nlohmann::json::array();
  for (const CompareRun& run : report.runs) {
    const nlohmann::json& r = run.record;
    runs.push_back({{"index", run.index},
                    {"prompt", r["prompt"]},
                    {"prompt_index", run.prompt},
                    {"seed", r["seed"]},
                    {"entry", r["entry"]},
                    {"exactness", r["exactness"]},
                    {"lossless", r["exactness"] != "lossy"},
                    {"steps", r["steps"]},
                    {"step_compression", r["step_compression"]},
                    {"seconds", r["seconds"]},
                    {"image", "runs/" + r["file"].get<std::string>()},
                    {"resumed", run.resumed}});
  }
  return {{"prompts", options.prompts},
          {"seeds", options.seeds},
          {"first_seed", options.base.seed},
          {"settings", settings},
          {"figure", "compare.png: rows prompt x seed in order, columns methods in order; speed-up and "
                     "accepted-length charts on the right"},
          {"methods", rows},
          {"runs", runs}};
}

}  // namespace sjd::engine
