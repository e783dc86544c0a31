// The byte tokenizer of the tiny default model, and the JSON-lines batch encoder.
#include <catch2/catch.hpp>

#include <limits>
#include <sstream>

#include "text/json_lines.h"
#include "text/tokenizer.h"

using sjd::text::load_tokenizer;
using sjd::text::TokenizerError;

TEST_CASE("byte tokenizer maps each UTF-8 byte to first_id + byte and back", "[text][byte]") {
  const auto tokenizer = load_tokenizer("byte", "", {{"first_id", 304}});
  const std::string text = "A é 猫\n";  // 1 + 1 + 2 + 1 + 3 + 1 bytes
  const std::vector<int64_t> ids = tokenizer->encode(text);
  REQUIRE(ids.size() == text.size());
  CHECK(ids[0] == 304 + 'A');
  CHECK(ids[2] == 304 + 0xC3);  // first byte of é
  CHECK(ids.back() == 304 + '\n');
  CHECK(tokenizer->decode(ids) == text);
  CHECK(tokenizer->token_id("A") == 304 + 'A');
  CHECK_FALSE(tokenizer->token_id("AB").has_value());
}

TEST_CASE("byte tokenizer decodes a broken UTF-8 sequence to U+FFFD and refuses foreign ids", "[text][byte]") {
  const auto tokenizer = load_tokenizer("byte", "", {{"first_id", 0}});
  CHECK(tokenizer->decode({'a', 0xE7, 0x8C, 'b'}) == "a\xEF\xBF\xBD" "b");
  CHECK_THROWS_WITH(tokenizer->decode({256}), Catch::Contains("id 256"));
  CHECK_THROWS_WITH(tokenizer->decode({-1}), Catch::Contains("id -1"));
}

TEST_CASE("byte tokenizer options are checked", "[text][byte]") {
  CHECK_THROWS_WITH(load_tokenizer("byte", "", nlohmann::json::object()), Catch::Contains("missing key \"first_id\" (the token id of byte 0x00"));
  CHECK_THROWS_WITH(load_tokenizer("byte", "", {{"first_id", -3}}), Catch::Contains("first_id: must not be negative"));
  CHECK_THROWS_WITH(load_tokenizer("byte", "", {{"first_id", std::numeric_limits<uint64_t>::max()}}),
                    Catch::Contains("first_id: 18446744073709551615 is past the largest integer taken"));
  CHECK_THROWS_WITH(load_tokenizer("byte", "", {{"first_id", "7"}}), Catch::Contains("expected an integer"));
  CHECK_THROWS_WITH(load_tokenizer("byte", "", {{"first_id", std::numeric_limits<int64_t>::max()}}),
                    Catch::Contains("first_id: too large for 256 byte ids after it"));
  CHECK_THROWS_WITH(load_tokenizer("byte", "", {{"first_id", 1}, {"frist", 2}}), Catch::Contains("frist: unknown key"));
  // kind and file are given apart (a bundle's section keys, or tokenize's flags): no options.
  CHECK_THROWS_WITH(load_tokenizer("byte", "", {{"kind", "byte"}, {"first_id", 1}}),
                    Catch::Contains("kind: unknown key (this tokenizer's options: first_id)"));
  CHECK_THROWS_WITH(load_tokenizer("bytes", "", {}), Catch::Contains("\"bytes\" is unknown"));
}

TEST_CASE("encode_json_lines encodes one JSON string per line and skips blank lines", "[text][json_lines]") {
  const auto tokenizer = load_tokenizer("byte", "", {{"first_id", 10}});
  std::istringstream input("\"ab\"\n\n\"\\u00e9\"\n\"\"\n");
  const auto encoded = sjd::text::encode_json_lines(*tokenizer, input, "prompts.jsonl");
  REQUIRE(encoded.size() == 3);
  CHECK(encoded[0] == std::vector<int64_t>{10 + 'a', 10 + 'b'});
  CHECK(encoded[1] == std::vector<int64_t>{10 + 0xC3, 10 + 0xA9});
  CHECK(encoded[2].empty());
}

TEST_CASE("encode_json_lines names the source and line of a bad line", "[text][json_lines]") {
  const auto tokenizer = load_tokenizer("byte", "", {{"first_id", 0}});
  std::istringstream not_json("\"fine\"\nnot json\n");
  CHECK_THROWS_WITH(sjd::text::encode_json_lines(*tokenizer, not_json, "in.jsonl"), Catch::Contains("in.jsonl:2: not valid JSON"));
  std::istringstream not_string("\"fine\"\n\n[1, 2]\n");
  CHECK_THROWS_WITH(sjd::text::encode_json_lines(*tokenizer, not_string, "in.jsonl"),
                    Catch::Contains("in.jsonl:3: expected a JSON string"));
}
