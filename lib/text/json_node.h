#pragma once
// Typed access to a JSON document that remembers where each value sits, so
// that every error names the file and the key path ("tokenizer.json:
// model.merges[12]: ...").
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sjd::text {

class JsonNode {
 public:
  // `source` names the document (a file path, or "tokenizer options").
  JsonNode(const nlohmann::json& value, std::string source, std::string path = "");

  const nlohmann::json& value() const { return *value_; }
  // "<source>: <path>", for messages about this value.
  std::string where() const;

  // The member `key`; a missing or null member is an error.
  JsonNode at(const std::string& key) const;
  JsonNode at(std::size_t index) const;
  // The member `key`, or nullopt when it is missing or null (JSON's "unset").
  std::optional<JsonNode> find(const std::string& key) const;

  std::string as_string() const;
  int64_t as_integer() const;
  bool as_bool() const;
  std::size_t array_size() const;  // an error unless this is an array
  void expect_object() const;

  std::string string_or(const std::string& key, const std::string& fallback) const;
  bool bool_or(const std::string& key, bool fallback) const;

  // Members other than `known` (a tokenizer's options) are errors that name them and list `known`.
  void reject_unknown_keys(std::initializer_list<std::string_view> known) const;

  // Throws TokenizerError "<source>: <path>: <problem>".
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  JsonNode child(const nlohmann::json& value, const std::string& step) const;

  const nlohmann::json* value_;
  std::string source_;
  std::string path_;
};

}  // namespace sjd::text
