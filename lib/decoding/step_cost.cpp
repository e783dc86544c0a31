#include "decoding/step_cost.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace sjd::decoding {

StepCostProfile::StepCostProfile(std::string name, int rows, std::vector<std::pair<int, double>> points)
    : name_(std::move(name)), rows_(rows), points_(std::move(points)) {
  if (rows_ < 1) throw std::invalid_argument("step-cost profile '" + name_ + "': rows must be >= 1");
  if (points_.empty()) throw std::invalid_argument("step-cost profile '" + name_ + "': no points");
  for (size_t i = 0; i < points_.size(); ++i) {
    const auto& [tokens, ms] = points_[i];
    if (tokens < 1 || !(ms > 0.0) || !std::isfinite(ms) || (i > 0 && tokens <= points_[i - 1].first)) {
      throw std::invalid_argument("step-cost profile '" + name_ + "': point " + std::to_string(i) +
                                  " must have tokens >= 1 ascending and a positive finite ms");
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

double StepCostProfile::ms(int tokens, int rows) const {
  const double x = static_cast<double>(tokens) * rows / rows_;  // the same work in the profile's row count
  if (points_.size() == 1 || x <= points_.front().first) return points_.front().second;
  size_t hi = 1;
  while (hi + 1 < points_.size() && points_[hi].first < x) ++hi;
  const auto& [x0, y0] = points_[hi - 1];
  const auto& [x1, y1] = points_[hi];
  const double slope = (y1 - y0) / (x1 - x0);
  return std::max(y0 + slope * (x - x0), points_.front().second);
}

nlohmann::json StepCostProfile::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& [tokens, ms] : points_) pts.push_back({tokens, ms});
  return {{"name", name_}, {"rows", rows_}, {"points", pts}};
}

StepCostProfile StepCostProfile::from_json(const nlohmann::json& j, const std::string& where) {
  try {
    if (!j.is_object()) throw std::invalid_argument("expected an object");
    std::vector<std::pair<int, double>> points;
    for (const auto& p : j.at("points")) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number()) {
        throw std::invalid_argument("/points: each point is [tokens, ms]");
      }
      points.emplace_back(p[0].get<int>(), p[1].get<double>());
    }
    const nlohmann::json& rows = j.at("rows");
    if (!rows.is_number_integer()) throw std::invalid_argument("/rows: expected an integer");
    return StepCostProfile(j.at("name").get<std::string>(), rows.get<int>(), std::move(points));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(where + ": step-cost profile: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

std::string StepCostProfile::summary() const {
  std::ostringstream out;
  out << name_ << " rows=" << rows_ << " ";
  for (size_t i = 0; i < points_.size(); ++i) out << (i ? "," : "") << points_[i].first << ":" << points_[i].second;
  return out.str();
}

}  // namespace sjd::decoding
