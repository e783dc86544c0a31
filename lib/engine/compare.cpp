#include "engine/compare.h"

#include <iomanip>
#include <sstream>

namespace sjd::engine {

GenerationSettings compare_settings(const GenerationSettings& base, const std::string& entry) {
  GenerationSettings settings = base;
  settings.method = entry;
  split_method_entry(settings);
  method_from_settings(settings);  // throws for a bad method or relaxation
  return settings;
}

CompareReport run_compare(Generator& generator, const CompareOptions& options) {
  CompareReport report;
  std::vector<std::vector<at::Tensor>> columns(options.methods.size());  // per method: images in row order
  for (size_t m = 0; m < options.methods.size(); ++m) {
    GenerationSettings settings = compare_settings(options.base, options.methods[m]);
    CompareRow row;
    int64_t tokens = 0, steps = 0, tree_windows = 0;
    double chain_sum = 0.0, k_sum = 0.0, depth_sum = 0.0;
    for (const std::string& prompt : options.prompts) {
      for (int s = 0; s < options.seeds; ++s) {
        settings.seed = options.base.seed + static_cast<uint64_t>(s);
        const GenerationOutput out = generator.generate(prompt, settings);
        row.method = out.method.describe();
        row.lossless = out.method.lossless();
        row.exactness = decoding::exactness_name(out.method.exactness());
        ++row.runs;
        tokens += out.stats.tokens;
        steps += out.stats.steps;
        row.seconds += out.total_seconds;
        const decoding::RunStats& st = out.stats;
        row.decode_seconds += st.prefill_seconds + st.forward_seconds + st.pipeline_seconds + st.verify_seconds;
        chain_sum += st.mean_chain() * static_cast<double>(st.steps);
        tree_windows += st.tree_windows;
        k_sum += static_cast<double>(st.tree_k_sum);
        depth_sum += static_cast<double>(st.tree_depth_sum);
        columns[m].push_back(out.image);
      }
    }
    row.steps = static_cast<double>(steps) / row.runs;
    row.step_compression = steps > 0 ? static_cast<double>(tokens) / steps : 0.0;
    row.accepted_drafts = row.step_compression - 1.0;
    row.seconds /= row.runs;
    row.decode_seconds /= row.runs;
    row.mean_chain = steps > 0 ? chain_sum / static_cast<double>(steps) : 0.0;
    row.mean_tree_k = tree_windows > 0 ? k_sum / static_cast<double>(tree_windows) : 0.0;
    row.mean_tree_depth = tree_windows > 0 ? depth_sum / static_cast<double>(tree_windows) : 0.0;
    report.rows.push_back(row);
  }
  for (size_t m = 0; m < options.methods.size(); ++m) {
    if (compare_settings(options.base, options.methods[m]).method != "ar") continue;
    for (auto& row : report.rows) {
      row.speedup = report.rows[m].seconds / row.seconds;
      row.decode_speedup = report.rows[m].decode_seconds / row.decode_seconds;
    }
  }
  std::vector<at::Tensor> grid_rows;
  for (size_t i = 0; i < columns.front().size(); ++i) {
    std::vector<at::Tensor> cells;
    for (const auto& column : columns) cells.push_back(column[i]);
    grid_rows.push_back(at::cat(cells, 1));
  }
  report.grid = at::cat(grid_rows, 0).contiguous();
  return report;
}

namespace {

// "1.23x", or "-" when there was no ar row to compare with.
std::string ratio(double value, const char* unit) {
  if (value <= 0.0) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << value << unit;
  return out.str();
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
        << r.step_compression << "x" << std::setprecision(1) << std::setw(7) << r.mean_chain << std::setw(9)
        << tree.str() << std::setprecision(3) << std::setw(10) << r.decode_seconds << std::setw(10)
        << ratio(r.decode_speedup, "x") << std::setprecision(3) << std::setw(9) << r.seconds << std::setw(10)
        << ratio(r.speedup, "x") << std::setw(12)
        << ratio(r.step_compression > 0 ? r.decode_speedup / r.step_compression : 0.0, "") << "\n";
  }
  return out.str();
}

nlohmann::json to_json(const CompareReport& report, const CompareOptions& options) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : report.rows) {
    rows.push_back({{"method", r.method},
                    {"lossless", r.lossless},
                    {"exactness", r.exactness},
                    {"runs", r.runs},
                    {"steps", r.steps},
                    {"step_compression", r.step_compression},
                    {"mean_accepted_drafts", r.accepted_drafts},
                    {"decode_seconds", r.decode_seconds},
                    {"seconds", r.seconds},
                    {"decode_speedup_vs_ar", r.decode_speedup},
                    {"speedup_vs_ar", r.speedup},
                    {"decode_speedup_per_compression",
                     r.step_compression > 0 ? r.decode_speedup / r.step_compression : 0.0},
                    {"mean_chain", r.mean_chain},
                    {"mean_tree_k", r.mean_tree_k},
                    {"mean_tree_depth", r.mean_tree_depth}});
  }
  return {{"prompts", options.prompts},
          {"seeds", options.seeds},
          {"first_seed", options.base.seed},
          {"settings", settings_to_json(options.base)},
          {"grid", "rows: prompt x seed in order; columns: methods in order"},
          {"methods", rows}};
}

}  // namespace sjd::engine
