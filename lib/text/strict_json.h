#pragma once
// JSON as sjd reads the files users and bundles give it: a key given twice in
// one object is an error (nlohmann_json would keep the last without a word:
// {"window": 4, "window": 8}, a second "model" in a tokenizer.json), and so is
// nesting past a few dozen levels (copying, printing or walking a value nested
// a million deep recurses as deep; a 2 MB bundle.json crashed sjd, and a
// tokenizer.json of nested Sequence steps took gigabytes). No settings file,
// bundle, profile, request or tokenizer.json comes near the limit.
// A number too close to 0 for a double (1e-400), which would be read as 0, is an error too.
#include <nlohmann/json.hpp>

#include <istream>
#include <stdexcept>
#include <string>

namespace sjd::text {

constexpr int kMaxJsonDepth = 64;

// Invalid JSON, a repeated key or too deep a nesting; the message starts with `where`.
class StrictJsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

nlohmann::json parse_strict_json(std::istream& in, const std::string& where);
nlohmann::json parse_strict_json(const std::string& text, const std::string& where);

}  // namespace sjd::text
