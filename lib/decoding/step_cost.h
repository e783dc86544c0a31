#pragma once
// What one decoding step costs as a function of how many tokens each row puts
// through the model (the root plus the window's draft nodes), measured by
// `sjd bench --calibrate` for one model, device, dtype and row count. The
// automatic window choice reads only this profile, never live timings, so the
// same seed and settings draw the same image on every machine.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

namespace sjd::decoding {

class StepCostProfile {
 public:
  StepCostProfile() = default;
  // points: (tokens per row, ms per step), tokens ascending from 1, ms positive.
  StepCostProfile(std::string name, int rows, std::vector<std::pair<int, double>> points);

  // The profile assumed when none was measured for a model and device: a fixed
  // cost plus a per-token cost (the shape of a small model on one CPU thread).
  static StepCostProfile generic();

  const std::string& name() const { return name_; }
  int rows() const { return rows_; }
  const std::vector<std::pair<int, double>>& points() const { return points_; }
  bool empty() const { return points_.empty(); }

  // ms of a step with `tokens` per row for `rows` rows: linear between measured
  // points and past the last one; a different row count scales the token axis.
  double ms(int tokens, int rows) const;

  nlohmann::json to_json() const;
  // `where` names the file and key in errors (std::invalid_argument).
  static StepCostProfile from_json(const nlohmann::json& j, const std::string& where);
  // One line for PNG metadata: "name rows=R 1:2.3,2:2.4,...".
  std::string summary() const;

 private:
  std::string name_;
  int rows_ = 1;
  std::vector<std::pair<int, double>> points_;
};

}  // namespace sjd::decoding
