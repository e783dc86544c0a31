#include "model/token_model.h"

#include <algorithm>
#include <stdexcept>

namespace sjd::model {

std::vector<RowWindow> shared_window(const std::vector<int64_t>& roots, const DraftTree& nodes) {
  std::vector<RowWindow> windows;
  for (size_t r = 0; r < roots.size(); ++r) windows.push_back({static_cast<int64_t>(r), roots[r], &nodes});
  return windows;
}

void TokenModel::start(const std::vector<RowPrompt>& rows, int64_t max_generated, int64_t max_window) {
  int64_t longest = 0, last_position = 0;
  for (const auto& r : rows) {
    if (r.tokens.empty()) throw std::invalid_argument("model: a prompt row has no tokens");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.tokens.size()));
    for (int64_t p : r.positions) last_position = std::max(last_position, p);
  }
  // Generated tokens, then one window after the last root, as wide as this model lays it out.
  const int64_t tail = max_generated + window_slots(max_window + 1);
  reserve(static_cast<int64_t>(rows.size()), longest + tail, last_position + tail);
  for (size_t r = 0; r < rows.size(); ++r) open_row(static_cast<int64_t>(r), rows[r]);
  started_rows_ = static_cast<int64_t>(rows.size());
}

at::Tensor TokenModel::forward(const std::vector<int64_t>& roots, const DraftTree& nodes) {
  return forward_rows(shared_window(roots, nodes));
}

void TokenModel::commit(const std::vector<int>& path) {
  std::vector<RowPath> paths;
  for (int64_t r = 0; r < started_rows_; ++r) paths.push_back({r, &path});
  commit_rows(paths);
}

}  // namespace sjd::model
