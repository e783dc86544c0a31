#include "io/json_fields.h"

#include <stdexcept>

namespace sjd::io {
namespace {

std::string range_words(int64_t minimum, int64_t maximum) {
  const std::string most = maximum == kNoMaximum ? "" : " no larger than " + std::to_string(maximum);
  if (minimum == 1) return "a positive integer" + most;
  if (minimum == 0) return "a non-negative integer" + most;
  if (maximum == kNoMaximum) return "an integer >= " + std::to_string(minimum);
  return "an integer in [" + std::to_string(minimum) + ", " + std::to_string(maximum) + "]";
}

}  // namespace

bool is_integer_in(const nlohmann::json& value, int64_t minimum, int64_t maximum) {
  // A JSON integer past int64's range reads as unsigned; get<int64_t>() would wrap it negative.
  if (value.is_number_unsigned()) {
    return maximum >= 0 && value.get<uint64_t>() <= static_cast<uint64_t>(maximum) &&
           static_cast<int64_t>(value.get<uint64_t>()) >= minimum;
  }
  return value.is_number_integer() && value.get<int64_t>() >= minimum && value.get<int64_t>() <= maximum;
}

int64_t required_integer(const nlohmann::json& object, const std::string& key, const std::string& where,
                         int64_t minimum, int64_t maximum) {
  const bool present = object.is_object() && object.contains(key);
  if (!present || !is_integer_in(object.at(key), minimum, maximum)) {
    throw std::invalid_argument(where + "." + key + ": expected " + range_words(minimum, maximum) +
                                (present ? ", found " + object.at(key).dump() : " (missing)"));
  }
  return object.at(key).get<int64_t>();
}

int64_t optional_integer(const nlohmann::json& object, const std::string& key, const std::string& where,
                         int64_t fallback, int64_t minimum, int64_t maximum) {
  if (!object.is_object() || !object.contains(key)) return fallback;
  return required_integer(object, key, where, minimum, maximum);
}

}  // namespace sjd::io
