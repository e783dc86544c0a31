#include "text/strict_json.h"

#include <set>
#include <vector>

#include "text/json_error.h"

namespace sjd::text {
namespace {

template <typename Input>
nlohmann::json parse_checked(Input&& input, const std::string& where) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys_of_open_objects;
  std::string repeated;  // the first key seen twice in one object
  const nlohmann::json::parser_callback_t check = [&](int depth, Event event, nlohmann::json& parsed) {
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      throw StrictJsonError(where + ": values nested more than " + std::to_string(kMaxJsonDepth) +
                            " levels deep (is this the right file?)");
    }
    if (event == Event::object_start) keys_of_open_objects.emplace_back();
    if (event == Event::object_end && !keys_of_open_objects.empty()) keys_of_open_objects.pop_back();
    if (event == Event::key && !keys_of_open_objects.empty() &&
        !keys_of_open_objects.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(std::forward<Input>(input), check);
  } catch (const nlohmann::json::exception& e) {  // syntax errors and numbers out of range (1e999)
    throw StrictJsonError(where + ": invalid JSON: " + json_error_message(e));
  }
  if (!repeated.empty()) throw StrictJsonError(where + ": key \"" + repeated + "\" appears twice in one object");
  return value;
}

}  // namespace

nlohmann::json parse_strict_json(std::istream& in, const std::string& where) { return parse_checked(in, where); }

nlohmann::json parse_strict_json(const std::string& text, const std::string& where) {
  return parse_checked(text, where);
}

}  // namespace sjd::text
