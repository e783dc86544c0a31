// tokenizer.json added tokens: matched before the model, raw or normalised,
// leftmost-longest, with single_word, lstrip and rstrip.
#include <catch2/catch.hpp>

#include "hf_test_files.h"

using sjd::testing::TempDir;
using sjd::text::testing::load_bpe;
using sjd::text::testing::piece_revealing_tokenizer;
using sjd::text::testing::token_strings;
using Strings = std::vector<std::string>;

namespace {

nlohmann::json added(int64_t id, const std::string& content, bool normalized, bool special = false,
                     bool single_word = false, bool lstrip = false, bool rstrip = false) {
  return {{"id", id},         {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

const Strings kCharacters = {"a", "b", "c", "d", "t", "s", "o", "h", "e", "l", " ", "!", "A", "x"};

}  // namespace

TEST_CASE("added tokens are matched before the model, leftmost and longest first", "[text][bpe][added]") {
  TempDir dir("added_basic");
  auto document = piece_revealing_tokenizer(kCharacters);
  document["added_tokens"] = {added(100, "<s>", false, true), added(101, "ab", false), added(102, "abc", false)};
  const auto tokenizer = load_bpe(dir, document);
  CHECK(token_strings(*tokenizer, document, "a<s>b") == Strings{"a", "<s>", "b"});
  CHECK(token_strings(*tokenizer, document, "xabcd") == Strings{"x", "abc", "d"});
  CHECK(token_strings(*tokenizer, document, "abab") == Strings{"ab", "ab"});
  CHECK(tokenizer->token_id("<s>") == 100);
  CHECK(tokenizer->decode({100, 0}) == "<s> a");  // no decoder: tokens joined with spaces
}

TEST_CASE("added tokens: lstrip and rstrip swallow the white space beside them", "[text][bpe][added]") {
  TempDir dir("added_strip");
  auto document = piece_revealing_tokenizer(kCharacters);
  document["added_tokens"] = {added(100, "[M]", false, true, false, true, true), added(101, "<r>", false, true, false, false, true)};
  const auto tokenizer = load_bpe(dir, document);
  CHECK(token_strings(*tokenizer, document, "a  [M]  b") == Strings{"a", "[M]", "b"});
  CHECK(token_strings(*tokenizer, document, "a <r> b") == Strings{"a", " ", "<r>", "b"});
}

TEST_CASE("added tokens: single_word only matches between non-word characters", "[text][bpe][added]") {
  TempDir dir("added_single_word");
  auto document = piece_revealing_tokenizer(kCharacters);
  document["added_tokens"] = {added(100, "cat", false, false, true)};
  const auto tokenizer = load_bpe(dir, document);
  CHECK(token_strings(*tokenizer, document, "a cat!") == Strings{"a", " ", "cat", "!"});
  CHECK(token_strings(*tokenizer, document, "cats") == Strings{"c", "a", "t", "s"});
  CHECK(token_strings(*tokenizer, document, "bobcat") == Strings{"b", "o", "b", "c", "a", "t"});
  // é is a word character too (and, with no token for it, is dropped by the model).
  CHECK(token_strings(*tokenizer, document, "\xC3\xA9" "cat") == Strings{"c", "a", "t"});
}

TEST_CASE("added tokens: normalized ones match the normalised text, raw ones the input", "[text][bpe][added]") {
  TempDir dir("added_normalized");
  auto document = piece_revealing_tokenizer(kCharacters);
  document["normalizer"] = {{"type", "Lowercase"}};
  document["added_tokens"] = {added(100, "Hello", true), added(101, "ABBA", false)};
  const auto tokenizer = load_bpe(dir, document);
  // "Hello" is spelt "hello" after normalisation, so any casing matches it.
  CHECK(token_strings(*tokenizer, document, "HELLO!") == Strings{"Hello", "!"});
  CHECK(token_strings(*tokenizer, document, "hello") == Strings{"Hello"});
  // "ABBA" is matched in the raw input only: lower-case text never forms it.
  CHECK(token_strings(*tokenizer, document, "ABBA") == Strings{"ABBA"});
  CHECK(token_strings(*tokenizer, document, "abba") == Strings{"a", "b", "b", "a"});
  // A normalised token decodes as its normalised spelling, as Hugging Face does.
  CHECK(tokenizer->decode({100}) == "hello");
}
