#pragma once
// Integer fields of a bundle's config sections (transformer, layout, VQ, text encoder), read by one
// rule with one message: a JSON integer (not 16.7, not "16") in the field's range, else an error
// naming where.key, the range and what was found ("layout.grid_height: expected a positive
// integer, found -3"; "(missing)" when the key is absent).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace sjd::io {

constexpr int64_t kNoMaximum = std::numeric_limits<int64_t>::max();

// Whether `value` is a JSON integer in [minimum, maximum] (one past int64's range reads as unsigned).
bool is_integer_in(const nlohmann::json& value, int64_t minimum, int64_t maximum);

int64_t required_integer(const nlohmann::json& object, const std::string& key, const std::string& where,
                         int64_t minimum, int64_t maximum = kNoMaximum);

// required_integer where the key is given, else `fallback`.
int64_t optional_integer(const nlohmann::json& object, const std::string& key, const std::string& where,
                         int64_t fallback, int64_t minimum, int64_t maximum = kNoMaximum);

}  // namespace sjd::io
