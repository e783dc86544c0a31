#include "text/closest_name.h"

#include <algorithm>
#include <cctype>

namespace sjd::text {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Optimal string alignment distance: Levenshtein plus the swap of two neighbours
// ("widnow"), the commonest typing slip.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t replace = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + replace});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// Edits allowed before a name stops looking like a slip: one in a short name
// ("ar"), up to a third of a long one ("temprature").
size_t allowed_edits(const std::string& name) { return std::max<size_t>(1, name.size() / 3); }

}  // namespace

std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  const std::string typed_lower = lower(typed);
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(typed_lower, lower(candidate));
    if (distance > allowed_edits(candidate)) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string unknown_name_message(const std::string& what, const std::string& typed,
                                 const std::vector<std::string>& candidates) {
  std::string message = "unknown " + what + " '" + typed + "'";
  if (const auto guess = closest_name(typed, candidates)) message += " -- did you mean '" + *guess + "'?";
  message += " (expected ";
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0) message += i + 1 == candidates.size() ? " or " : ", ";
    message += candidates[i];
  }
  return message + ")";
}

}  // namespace sjd::text
