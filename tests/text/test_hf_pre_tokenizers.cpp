// tokenizer.json pre-tokenizers, seen through a vocabulary that holds the
// expected pieces whole (ignore_merges): each piece comes out as one token.
#include <catch2/catch.hpp>

#include "hf_test_files.h"

using sjd::testing::TempDir;
using sjd::text::testing::load_bpe;
using sjd::text::testing::piece_revealing_tokenizer;
using sjd::text::testing::token_strings;
using Strings = std::vector<std::string>;

namespace {

nlohmann::json split(const nlohmann::json& pattern, const std::string& behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

// The pieces `pre_tokenizer` cuts `text` into, given a vocabulary with every expected piece.
Strings pieces(const nlohmann::json& pre_tokenizer, const Strings& vocabulary, const std::string& text) {
  TempDir dir("pre_tokenizer");
  auto document = piece_revealing_tokenizer(vocabulary);
  document["pre_tokenizer"] = pre_tokenizer;
  return token_strings(*load_bpe(dir, document), document, text);
}

}  // namespace

TEST_CASE("Split: each delimiter behaviour", "[text][bpe][pre_tokenizer]") {
  const Strings vocab = {"a", "b", "c", "-", "a-", "b-", "-b", "-c", "--"};
  const nlohmann::json dash = {{"String", "-"}};
  CHECK(pieces(split(dash, "Removed"), vocab, "a-b--c") == Strings{"a", "b", "c"});
  CHECK(pieces(split(dash, "Isolated"), vocab, "a-b--c") == Strings{"a", "-", "b", "-", "-", "c"});
  CHECK(pieces(split(dash, "MergedWithPrevious"), vocab, "a-b--c") == Strings{"a-", "b-", "-", "c"});
  CHECK(pieces(split(dash, "MergedWithNext"), vocab, "a-b--c") == Strings{"a", "-b", "-", "-c"});
  CHECK(pieces(split(dash, "Contiguous"), vocab, "a-b--c") == Strings{"a", "-", "b", "--", "c"});
  // invert: the pattern names what to keep.
  CHECK(pieces(split(dash, "Removed", true), vocab, "a-b--c") == Strings{"-", "-", "-"});
  CHECK(pieces(split({{"Regex", "-+"}}, "Isolated"), vocab, "a-b--c") == Strings{"a", "-", "b", "--", "c"});
  // A String pattern is literal, not a regex.
  CHECK(pieces(split({{"String", "."}}, "Removed"), {"a", "b", ".", "a.b"}, "a.b") == Strings{"a", "b"});
}

TEST_CASE("Digits, Punctuation, Whitespace and WhitespaceSplit", "[text][bpe][pre_tokenizer]") {
  const Strings vocab = {"ab", "1", "2", "12", "c", "a", "b", "hi", ",", "there", "!", "!!", "hi,", "there!!", " "};
  CHECK(pieces({{"type", "Digits"}, {"individual_digits", true}}, vocab, "ab12c") == Strings{"ab", "1", "2", "c"});
  CHECK(pieces({{"type", "Digits"}, {"individual_digits", false}}, vocab, "ab12c") == Strings{"ab", "12", "c"});
  CHECK(pieces({{"type", "Punctuation"}}, vocab, "hi,there!!") == Strings{"hi", ",", "there", "!", "!"});
  CHECK(pieces({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, vocab, "hi,there!!") ==
        Strings{"hi", ",", "there", "!!"});
  CHECK(pieces({{"type", "Whitespace"}}, vocab, "hi, there!!") == Strings{"hi", ",", "there", "!!"});
  CHECK(pieces({{"type", "WhitespaceSplit"}}, vocab, "hi,\u3000there!!") == Strings{"hi,", "there!!"});
}

TEST_CASE("Metaspace replaces spaces, prepends by scheme and splits before each replacement", "[text][bpe][pre_tokenizer]") {
  const Strings vocab = {"\u2581hi", "\u2581there", "hi", "\u2581", "<x>"};
  const nlohmann::json always = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  CHECK(pieces(always, vocab, "hi there") == Strings{"\u2581hi", "\u2581there"});
  const nlohmann::json never = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}, {"split", true}};
  CHECK(pieces(never, vocab, "hi there") == Strings{"hi", "\u2581there"});
  // "first" prepends only to the piece that starts the input, not after an added token.
  TempDir dir("metaspace_first");
  auto document = piece_revealing_tokenizer(vocab);
  document["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}};
  document["added_tokens"] = {{{"id", 4}, {"content", "<x>"}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", true}}};
  const auto tokenizer = load_bpe(dir, document);
  CHECK(token_strings(*tokenizer, document, "hi there") == Strings{"\u2581hi", "\u2581there"});
  CHECK(token_strings(*tokenizer, document, "<x>hi there") == Strings{"<x>", "hi", "\u2581there"});
}

TEST_CASE("ByteLevel spells bytes in GPT-2's alphabet and splits with GPT-2's pattern", "[text][bpe][pre_tokenizer]") {
  // Ġ is the space byte, Ã© the two bytes of é.
  const Strings vocab = {"Hi", "\u0120", "\u0120there", "\u0120Hi", "caf\u00c3\u00a9", "'s", "\u0120\u0120"};
  const nlohmann::json plain = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  CHECK(pieces(plain, vocab, "Hi  there") == Strings{"Hi", "\u0120", "\u0120there"});
  CHECK(pieces(plain, vocab, "café's") == Strings{"caf\u00c3\u00a9", "'s"});
  const nlohmann::json prefixed = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  CHECK(pieces(prefixed, vocab, "Hi") == Strings{"\u0120Hi"});
  const nlohmann::json no_regex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  CHECK(pieces(no_regex, vocab, "  ") == Strings{"\u0120\u0120"});
}

TEST_CASE("Chameleon's pre-tokenizer: a Sequence of Splits, then ByteLevel", "[text][bpe][pre_tokenizer]") {
  const nlohmann::json chameleon = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split({{"Regex", "<sentinel:[0-9]+>"}}, "Isolated"),
        split({{"Regex", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"}}, "Isolated"),
        split({{"Regex", "([\t\n]|    |  )"}}, "Isolated"),
        split({{"Regex", "\\p{N}"}}, "Isolated"),
        split({{"Regex", "[\\p{P}!-/:-@\\[-`{-~]"}}, "Isolated"),
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}}}};
  const Strings vocab = {"IMGIMGABZ", "<", "sentinel", ":", ">", "1", "2", "\u0120ab", ",", "\u0120\u0120", "cd", "\u010a",
                         "\u0120"};
  CHECK(pieces(chameleon, vocab, "IMGIMGABZ12 ab,  cd\n") ==
        Strings{"IMGIMGABZ", "1", "2", "\u0120ab", ",", "\u0120\u0120", "cd", "\u010a"});
  // A sentinel is isolated first, then its punctuation and digits are split off again.
  CHECK(pieces(chameleon, vocab, "<sentinel:12>") == Strings{"<", "sentinel", ":", "1", "2", ">"});
}
