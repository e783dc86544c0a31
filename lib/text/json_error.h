#pragma once
// nlohmann_json's messages open with the library's own error code
// ("[json.exception.parse_error.101] parse error at line 1, column 2: ...").
// A user needs the part after it: what is wrong and where.
#include <nlohmann/json.hpp>

#include <string>

#include "text/utf8.h"

namespace sjd::text {

inline std::string json_error_message(const nlohmann::json::exception& error) {
  std::string message = error.what();
  if (message.rfind("[json.exception.", 0) == 0) {
    const size_t end = message.find("] ");
    if (end != std::string::npos) message.erase(0, end + 2);
  }
  // A parse error quotes the bytes it last read, which may be the very bytes that are not UTF-8:
  // they would reach the terminal raw.
  return utf8::to_valid(message);
}

}  // namespace sjd::text
