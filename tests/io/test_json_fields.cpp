// The one rule for a config section's integer fields (io/json_fields.h): a JSON integer in range,
// else an error naming where.key, the range and what was found.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "io/json_fields.h"

using namespace sjd;
using Catch::Matchers::Equals;

namespace {

std::string error_of(const nlohmann::json& section, int64_t minimum, int64_t maximum = io::kNoMaximum) {
  try {
    io::required_integer(section, "n", "bundle.json: layout", minimum, maximum);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("json fields: an integer in range is read, anything else is refused naming the key", "[io][json]") {
  CHECK(io::required_integer({{"n", 7}}, "n", "w", 1) == 7);
  CHECK(io::required_integer({{"n", 0}}, "n", "w", 0, 5) == 0);
  CHECK(io::required_integer({{"n", -4}}, "n", "w", -10) == -4);
  CHECK(io::optional_integer(nlohmann::json::object(), "n", "w", 32, 1) == 32);
  CHECK(io::optional_integer({{"n", 64}}, "n", "w", 32, 1) == 64);

  CHECK_THAT(error_of({{"n", 16.7}}, 1), Equals("bundle.json: layout.n: expected a positive integer, found 16.7"));
  CHECK_THAT(error_of({{"n", "16"}}, 1), Equals("bundle.json: layout.n: expected a positive integer, found \"16\""));
  CHECK_THAT(error_of({{"n", 0}}, 1), Equals("bundle.json: layout.n: expected a positive integer, found 0"));
  CHECK_THAT(error_of({{"n", -1}}, 0), Equals("bundle.json: layout.n: expected a non-negative integer, found -1"));
  CHECK_THAT(error_of({{"m", 1}}, 1), Equals("bundle.json: layout.n: expected a positive integer (missing)"));
  CHECK_THAT(error_of({{"n", 17}}, 1, 16),
             Equals("bundle.json: layout.n: expected a positive integer no larger than 16, found 17"));
  CHECK_THAT(error_of({{"n", 2}}, 3, 9), Equals("bundle.json: layout.n: expected an integer in [3, 9], found 2"));
  CHECK_THAT(error_of({{"n", 2}}, 3), Equals("bundle.json: layout.n: expected an integer >= 3, found 2"));
  // Past int64's range a JSON integer is unsigned; read as int64 it would wrap to -1 and pass a minimum of -10.
  CHECK_THAT(error_of(nlohmann::json::parse(R"({"n": 18446744073709551615})"), -10),
             Equals("bundle.json: layout.n: expected an integer >= -10, found 18446744073709551615"));
  // An optional key that is given is held to the same rule.
  CHECK_THROWS_WITH(io::optional_integer({{"n", 0}}, "n", "w", 32, 1), "w.n: expected a positive integer, found 0");
}
