#include "text/strict_json.h"

#include <set>
#include <vector>

#include "text/json_error.h"

namespace sjd::text {
namespace {

using Json = nlohmann::json;

// Whether a number's text has a non-zero digit before its exponent: such a number read as 0.0 was too
// small for a double (1e-400), and a setting of 0 means something else (a temperature of 0 decodes greedily).
bool names_a_non_zero(const std::string& number_text) {
  for (const char c : number_text) {
    if (c == 'e' || c == 'E') break;
    if (c >= '1' && c <= '9') return true;
  }
  return false;
}

// nlohmann_json's own document builder, with sjd's checks on the way: a SAX handler sees each number's text
// (a parser callback sees only the double it became) and each key before the object holds it.
class CheckingBuilder {
 public:
  CheckingBuilder(Json& result, const std::string& where) : builder_(result), where_(where) {}

  bool null() { return builder_.null(); }
  bool boolean(bool value) { return builder_.boolean(value); }
  bool number_integer(Json::number_integer_t value) { return builder_.number_integer(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return builder_.number_unsigned(value); }
  bool number_float(Json::number_float_t value, const Json::string_t& text) {
    if (value == 0.0 && names_a_non_zero(text)) {
      const std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;  // digits can run on
      throw StrictJsonError(where_ + ": the number " + shown + " is too close to 0 for a double, which would hold 0");
    }
    return builder_.number_float(value, text);
  }
  bool string(Json::string_t& value) { return builder_.string(value); }
  bool binary(Json::binary_t& value) { return builder_.binary(value); }
  bool start_object(std::size_t size) {
    open_container();
    keys_of_open_objects_.emplace_back();
    return builder_.start_object(size);
  }
  bool key(Json::string_t& name) {
    if (!keys_of_open_objects_.back().insert(name).second) {
      throw StrictJsonError(where_ + ": key \"" + name + "\" appears twice in one object");
    }
    return builder_.key(name);
  }
  bool end_object() {
    --open_containers_;
    keys_of_open_objects_.pop_back();
    return builder_.end_object();
  }
  bool start_array(std::size_t size) {
    open_container();
    return builder_.start_array(size);
  }
  bool end_array() {
    --open_containers_;
    return builder_.end_array();
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& error) {
    return builder_.parse_error(position, last_token, error);  // throws it
  }

 private:
  void open_container() {
    if (open_containers_++ >= kMaxJsonDepth) {
      throw StrictJsonError(where_ + ": values nested more than " + std::to_string(kMaxJsonDepth) +
                            " levels deep (is this the right file?)");
    }
  }

  nlohmann::detail::json_sax_dom_parser<Json> builder_;
  const std::string& where_;
  int open_containers_ = 0;
  std::vector<std::set<std::string>> keys_of_open_objects_;
};

template <typename Input>
Json parse_checked(Input&& input, const std::string& where) {
  Json value;
  CheckingBuilder builder(value, where);
  try {
    Json::sax_parse(std::forward<Input>(input), &builder);
  } catch (const Json::exception& e) {  // syntax errors and numbers out of range (1e999)
    throw StrictJsonError(where + ": invalid JSON: " + json_error_message(e));
  }
  return value;
}

}  // namespace

Json parse_strict_json(std::istream& in, const std::string& where) { return parse_checked(in, where); }

Json parse_strict_json(const std::string& text, const std::string& where) { return parse_checked(text, where); }

}  // namespace sjd::text
