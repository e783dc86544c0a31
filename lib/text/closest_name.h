#pragma once
// "Did you mean ...?" for a mistyped name (a method, a settings key, a
// relaxation): the known name nearest in edit distance, if it is near enough
// to be the likely intent.
#include <optional>
#include <string>
#include <vector>

namespace sjd::text {

// The candidate with the fewest single-character edits (insert, delete, replace,
// swap of neighbours; case ignored) from `typed`, when that is a small share of
// its length; nullopt when none is close.
std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& candidates);

// "unknown WHAT 'typed' -- did you mean 'x'? (expected a, b or c)"; the
// question only when a candidate is close.
std::string unknown_name_message(const std::string& what, const std::string& typed,
                                 const std::vector<std::string>& candidates);

}  // namespace sjd::text
