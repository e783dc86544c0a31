#include "decoding/step_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "text/json_error.h"

namespace sjd::decoding {
namespace {

// The times need not grow with the tokens: a GPU's curve is nearly flat, and a measured point may dip below
// its neighbour by noise. ms_at never prices a window below the AR step (the first point), so a curve that
// falls makes windows look free, not cheaper than no window.
void check_curve(const std::string& name, const StepCostCurve& curve) {
  const std::string which = "step-cost profile '" + name + "', rows=" + std::to_string(curve.rows);
  if (curve.rows < 1) throw std::invalid_argument("step-cost profile '" + name + "': rows must be >= 1");
  if (curve.points.empty()) throw std::invalid_argument(which + ": no points");
  for (size_t i = 0; i < curve.points.size(); ++i) {
    const auto& [tokens, ms] = curve.points[i];
    if (tokens < 1 || !(ms > 0.0) || !std::isfinite(ms) || (i > 0 && tokens <= curve.points[i - 1].first)) {
      throw std::invalid_argument(which + ": point " + std::to_string(i) +
                                  " must have tokens >= 1 ascending and a positive finite ms");
    }
  }
}

// j[key], or an error naming the key where it is missing.
const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw std::invalid_argument(where + ": missing key \"" + key + "\"");
  return j.at(key);
}

// A JSON integer that an int holds: get<int>() would wrap 4294967297 to 1.
bool is_int(const nlohmann::json& value) {
  return io::is_integer_in(value, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
}

std::vector<std::pair<int, double>> points_from_json(const nlohmann::json& j, const std::string& where) {
  const nlohmann::json& all = member(j, "points", where.empty() ? "step-cost profile" : where);
  if (!all.is_array()) throw std::invalid_argument(where + "/points: expected an array of [tokens, ms]");
  std::vector<std::pair<int, double>> points;
  for (const auto& p : all) {
    if (!p.is_array() || p.size() != 2 || !is_int(p[0]) || !p[1].is_number()) {
      throw std::invalid_argument(where + "/points: each point is [tokens, ms] (got " + p.dump() + ")");
    }
    points.emplace_back(p[0].get<int>(), p[1].get<double>());
  }
  return points;
}

int rows_from_json(const nlohmann::json& j, const std::string& where) {
  const nlohmann::json& rows = member(j, "rows", where.empty() ? "step-cost profile" : where);
  if (!is_int(rows)) throw std::invalid_argument(where + "/rows: expected an integer (got " + rows.dump() + ")");
  return rows.get<int>();
}

}  // namespace

double StepCostCurve::ms_at(double tokens) const {
  if (points.size() == 1 || tokens <= points.front().first) return points.front().second;
  size_t hi = 1;
  while (hi + 1 < points.size() && points[hi].first < tokens) ++hi;
  const auto& [x0, y0] = points[hi - 1];
  const auto& [x1, y1] = points[hi];
  const double slope = (y1 - y0) / (x1 - x0);
  return std::max(y0 + slope * (tokens - x0), points.front().second);
}

StepCostProfile::StepCostProfile(std::string name, int rows, std::vector<std::pair<int, double>> points)
    : StepCostProfile(std::move(name), {StepCostCurve{rows, std::move(points)}}) {}

StepCostProfile::StepCostProfile(std::string name, std::vector<StepCostCurve> curves)
    : name_(std::move(name)), curves_(std::move(curves)) {
  if (curves_.empty()) throw std::invalid_argument("step-cost profile '" + name_ + "': no curves");
  for (const StepCostCurve& curve : curves_) check_curve(name_, curve);
  std::sort(curves_.begin(), curves_.end(), [](const auto& a, const auto& b) { return a.rows < b.rows; });
  for (size_t i = 1; i < curves_.size(); ++i) {
    if (curves_[i].rows == curves_[i - 1].rows) {
      throw std::invalid_argument("step-cost profile '" + name_ + "': two curves for rows=" +
                                  std::to_string(curves_[i].rows));
    }
  }
}

StepCostProfile StepCostProfile::generic() {
  // ~2.2 ms fixed and ~0.12 ms per token and row: the default model on one CPU
  // thread before the leaner step (docs/benchmarks.md). Used only when nothing
  // better is known; stats and PNGs say so by its name.
  std::vector<std::pair<int, double>> points;
  for (int t : {1, 2, 4, 8, 16, 32, 64, 128}) points.emplace_back(t, 2.2 + 0.24 * t);
  return StepCostProfile("generic (assumed, not measured)", 2, std::move(points));
}

StepCostProfile StepCostProfile::generic_gpu() {
  // `sjd bench` at the Lumina-mGPT 7B 768 px preset, bf16, one H100, CUDA graphs (commit 627470a,
  // docs/benchmarks.md "The GPU path"): a CFG pair's AR step, L = 16 and 64 windows and the
  // 145-node tree, and the batch axis' AR and L = 16 steps at 4 and 16 prompts. Only the
  // curves' shape matters to the planner, which compares steps of one model.
  return StepCostProfile("generic GPU (Lumina-mGPT 7B, bf16, one H100; assumed, not measured for this model)",
                         {{2, {{1, 8.80}, {17, 10.19}, {65, 11.72}, {146, 16.01}}},
                          {8, {{1, 9.93}, {17, 11.98}}},
                          {32, {{1, 15.54}, {17, 27.56}}}});
}

double StepCostProfile::ms(int tokens, int rows) const {
  // The first curve measured at `rows` rows or more.
  const auto upper = std::lower_bound(curves_.begin(), curves_.end(), rows,
                                      [](const StepCostCurve& c, int r) { return c.rows < r; });
  const auto scaled = [&](const StepCostCurve& c) {  // the same work in the curve's row count
    return c.ms_at(static_cast<double>(tokens) * rows / c.rows);
  };
  if (upper == curves_.end()) return scaled(curves_.back());
  if (upper->rows == rows || upper == curves_.begin()) return scaled(*upper);
  const StepCostCurve& lower = *(upper - 1);
  const double t = static_cast<double>(rows - lower.rows) / (upper->rows - lower.rows);
  return (1.0 - t) * lower.ms_at(tokens) + t * upper->ms_at(tokens);
}

nlohmann::json StepCostProfile::to_json() const {
  nlohmann::json curves = nlohmann::json::array();
  for (const StepCostCurve& curve : curves_) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& [tokens, ms] : curve.points) pts.push_back({tokens, ms});
    curves.push_back({{"rows", curve.rows}, {"points", pts}});
  }
  return {{"name", name_}, {"curves", curves}};
}

StepCostProfile StepCostProfile::from_json(const nlohmann::json& j, const std::string& where) {
  try {
    if (!j.is_object()) throw std::invalid_argument("expected an object");
    const nlohmann::json& name_value = member(j, "name", "step-cost profile");
    if (!name_value.is_string()) throw std::invalid_argument("/name: expected a string");
    const std::string name = name_value.get<std::string>();
    if (!j.contains("curves")) return StepCostProfile(name, rows_from_json(j, ""), points_from_json(j, ""));
    if (!j.at("curves").is_array()) throw std::invalid_argument("/curves: expected an array");
    std::vector<StepCostCurve> curves;
    for (size_t i = 0; i < j.at("curves").size(); ++i) {
      const nlohmann::json& curve = j.at("curves")[i];
      const std::string at = "/curves/" + std::to_string(i);
      if (!curve.is_object()) throw std::invalid_argument(at + ": expected an object");
      curves.push_back({rows_from_json(curve, at), points_from_json(curve, at)});
    }
    return StepCostProfile(name, std::move(curves));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(where + ": step-cost profile: " + text::json_error_message(e));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

std::string StepCostProfile::summary() const {
  std::ostringstream out;
  out << name_;
  for (size_t c = 0; c < curves_.size(); ++c) {
    out << (c ? "; " : " ") << "rows=" << curves_[c].rows << " ";
    const auto& points = curves_[c].points;
    for (size_t i = 0; i < points.size(); ++i) out << (i ? "," : "") << points[i].first << ":" << points[i].second;
  }
  return out.str();
}

}  // namespace sjd::decoding
