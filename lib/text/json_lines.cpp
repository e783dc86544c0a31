#include "text/json_lines.h"
#include "text/json_error.h"

#include <nlohmann/json.hpp>

namespace sjd::text {

std::vector<std::vector<int64_t>> encode_json_lines(const Tokenizer& tokenizer, std::istream& input,
                                                    const std::string& source_name) {
  std::vector<std::vector<int64_t>> encoded;
  std::string line;
  for (std::size_t line_number = 1; std::getline(input, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source_name + ":" + std::to_string(line_number) + ": ";
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& error) {
      throw TokenizerError(where + "not valid JSON: " + json_error_message(error));
    }
    if (!value.is_string()) throw TokenizerError(where + "expected a JSON string, found " + value.dump());
    try {
      encoded.push_back(tokenizer.encode(value.get<std::string>()));
    } catch (const TokenizerError& error) {
      throw TokenizerError(where + error.what());
    }
  }
  if (input.bad()) throw TokenizerError(source_name + ": read error");
  return encoded;
}

}  // namespace sjd::text
