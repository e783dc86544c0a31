#include "text/json_node.h"

#include <algorithm>
#include <cstdint>

#include "text/tokenizer.h"

namespace sjd::text {

JsonNode::JsonNode(const nlohmann::json& value, std::string source, std::string path)
    : value_(&value), source_(std::move(source)), path_(std::move(path)) {}

JsonNode JsonNode::child(const nlohmann::json& value, const std::string& step) const {
  const bool is_index = !step.empty() && step.front() == '[';
  return JsonNode(value, source_, path_.empty() || is_index ? path_ + step : path_ + "." + step);
}

JsonNode JsonNode::at(const std::string& key) const {
  expect_object();
  const auto found = value_->find(key);
  if (found == value_->end() || found->is_null()) fail("missing key \"" + key + "\"");
  return child(*found, key);
}

JsonNode JsonNode::at(std::size_t index) const {
  if (index >= array_size()) fail("has no element " + std::to_string(index));
  return child((*value_)[index], "[" + std::to_string(index) + "]");
}

std::optional<JsonNode> JsonNode::find(const std::string& key) const {
  expect_object();
  const auto found = value_->find(key);
  if (found == value_->end() || found->is_null()) return std::nullopt;
  return child(*found, key);
}

std::string JsonNode::as_string() const {
  if (!value_->is_string()) fail("expected a string, found " + value_->dump());
  return value_->get<std::string>();
}

int64_t JsonNode::as_integer() const {
  if (!value_->is_number_integer()) fail("expected an integer, found " + value_->dump());
  // Read as int64 it would wrap: 18446744073709551615 became -1 and was called negative.
  if (value_->is_number_unsigned() && value_->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    fail(value_->dump() + " is past the largest integer taken, 9223372036854775807");
  }
  return value_->get<int64_t>();
}

bool JsonNode::as_bool() const {
  if (!value_->is_boolean()) fail("expected true or false, found " + value_->dump());
  return value_->get<bool>();
}

std::size_t JsonNode::array_size() const {
  if (!value_->is_array()) fail("expected an array, found " + std::string(value_->type_name()));
  return value_->size();
}

void JsonNode::expect_object() const {
  if (!value_->is_object()) fail("expected an object, found " + std::string(value_->type_name()));
}

std::string JsonNode::string_or(const std::string& key, const std::string& fallback) const {
  const auto member = find(key);
  return member ? member->as_string() : fallback;
}

bool JsonNode::bool_or(const std::string& key, bool fallback) const {
  const auto member = find(key);
  return member ? member->as_bool() : fallback;
}

void JsonNode::reject_unknown_keys(std::initializer_list<std::string_view> known) const {
  expect_object();
  for (const auto& item : value_->items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      std::string list;
      for (const std::string_view name : known) list += (list.empty() ? "" : ", ") + std::string(name);
      child(item.value(), item.key())
          .fail("unknown key (" +
                (list.empty() ? std::string("this tokenizer takes no options") : "this tokenizer's options: " + list) +
                ")");
    }
  }
}

std::string JsonNode::where() const { return path_.empty() ? source_ : source_ + ": " + path_; }

void JsonNode::fail(const std::string& problem) const { throw TokenizerError(where() + ": " + problem); }

}  // namespace sjd::text
