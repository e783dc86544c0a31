#pragma once
// What one decoding step costs as a function of how many tokens each row puts
// through the model (the root plus the window's draft nodes), measured by
// `sjd bench --calibrate` for one model, device and dtype, at one or more row
// counts (batch sizes). The automatic window choice reads only this profile,
// never live timings, so the same seed and settings draw the same image on
// every machine.
//
// Why several row counts: a row's attention reads its own KV cache once per
// step however many window tokens it carries, so 16 rows of 1 token cost more
// than 2 rows of 8 and a window is relatively cheaper in a full batch than the
// token count alone says. A curve measured at the batch's own row count is
// exact; between two measured counts the cost is interpolated linearly in rows.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

namespace sjd::decoding {

// ms per step against tokens per row, measured with `rows` rows in the forward.
struct StepCostCurve {
  int rows = 1;
  std::vector<std::pair<int, double>> points;  // (tokens per row, ms per step), tokens ascending from 1

  // ms at `tokens` per row (a real number: other row counts scale the token
  // axis): linear between measured points and past the last one.
  double ms_at(double tokens) const;
};

class StepCostProfile {
 public:
  StepCostProfile() = default;
  // One curve: points are (tokens per row, ms per step), tokens ascending from 1, ms positive.
  StepCostProfile(std::string name, int rows, std::vector<std::pair<int, double>> points);
  // Curves at distinct row counts, in any order (kept sorted by rows).
  StepCostProfile(std::string name, std::vector<StepCostCurve> curves);

  // The profile assumed when none was measured for a model and device: a fixed
  // cost plus a per-token cost (the shape of a small model on one CPU thread).
  static StepCostProfile generic();
  // The same for a GPU: a 7B model's steps on an H100, nearly flat in the window's tokens
  // until a batch fills the compute (the CPU's shape would plan a GPU's windows far too short).
  static StepCostProfile generic_gpu();

  const std::string& name() const { return name_; }
  const std::vector<StepCostCurve>& curves() const { return curves_; }
  bool empty() const { return curves_.empty(); }

  // ms of a step with `tokens` per row for `rows` rows. A measured row count
  // reads its curve; between two, linear in rows; beyond the measured range,
  // the nearest curve with its token axis scaled by the row ratio (the same
  // work in its row count).
  double ms(int tokens, int rows) const;

  // {"name", "curves": [{"rows", "points"}, ...]}; from_json also reads the
  // one-curve layout of earlier versions ({"name", "rows", "points"}).
  nlohmann::json to_json() const;
  // `where` names the file and key in errors (std::invalid_argument).
  static StepCostProfile from_json(const nlohmann::json& j, const std::string& where);
  // One line for PNG metadata: "name rows=R 1:2.3,2:2.4,...; rows=R2 ...".
  std::string summary() const;

 private:
  std::string name_;
  std::vector<StepCostCurve> curves_;  // rows ascending, distinct
};

}  // namespace sjd::decoding
