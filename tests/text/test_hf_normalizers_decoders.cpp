// tokenizer.json normalizers and decoders.
#include <catch2/catch.hpp>

#include "hf_test_files.h"

using sjd::testing::TempDir;
using sjd::text::testing::load_bpe;
using sjd::text::testing::piece_revealing_tokenizer;
using sjd::text::testing::token_strings;
using Strings = std::vector<std::string>;

namespace {

// The tokens of `text` after `normalizer`, over a vocabulary of the expected tokens.
Strings normalized(const nlohmann::json& normalizer, const Strings& vocabulary, const std::string& text) {
  TempDir dir("normalizer");
  auto document = piece_revealing_tokenizer(vocabulary);
  document["normalizer"] = normalizer;
  return token_strings(*load_bpe(dir, document), document, text);
}

// The text `decoder` makes of the tokens `ids` name in `vocabulary`.
std::string decoded(const nlohmann::json& decoder, const Strings& vocabulary, const std::vector<int64_t>& ids) {
  TempDir dir("decoder");
  auto document = piece_revealing_tokenizer(vocabulary);
  document["decoder"] = decoder;
  return load_bpe(dir, document)->decode(ids);
}

}  // namespace

TEST_CASE("normalizers: Unicode forms, Lowercase, Replace, Prepend, Strip and Sequence", "[text][bpe][normalizer]") {
  const Strings vocab = {"caf\u00e9", "cafe\u0301", "cafe", "fi", "\u00e0b", "a_b", "a b", "\u2581ab", "ab"};
  CHECK(normalized({{"type", "NFC"}}, vocab, "cafe\u0301") == Strings{"caf\u00e9"});
  CHECK(normalized({{"type", "NFD"}}, vocab, "caf\u00e9") == Strings{"cafe\u0301"});
  CHECK(normalized({{"type", "NFKC"}}, vocab, "\ufb01") == Strings{"fi"});
  CHECK(normalized({{"type", "Lowercase"}}, vocab, "\u00c0B") == Strings{"\u00e0b"});
  CHECK(normalized({{"type", "Replace"}, {"pattern", {{"String", "-"}}}, {"content", "_"}}, vocab, "a-b") == Strings{"a_b"});
  CHECK(normalized({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}}, vocab, "a   b") == Strings{"a b"});
  CHECK(normalized({{"type", "Prepend"}, {"prepend", "\u2581"}}, vocab, "ab") == Strings{"\u2581ab"});
  CHECK(normalized({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, vocab, " \u3000ab\t") == Strings{"ab"});
  const nlohmann::json accents = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}};
  CHECK(normalized(accents, vocab, "caf\u00e9") == Strings{"cafe"});
  const nlohmann::json sequence = {{"type", "Sequence"},
                                   {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}},
                                                    {{"type", "Replace"}, {"pattern", {{"String", "\ufb01"}}}, {"content", "x"}}}}};
  CHECK(normalized(sequence, vocab, "\ufb01") == Strings{"fi"});  // NFKC ran before Replace could see the ligature
}

TEST_CASE("decoders: ByteLevel, ByteFallback, Metaspace, Fuse, Strip, Replace", "[text][bpe][decoder]") {
  // ByteLevel: Ġ is a space, Ã© the bytes of é; a token outside the alphabet keeps its own bytes.
  CHECK(decoded({{"type", "ByteLevel"}}, {"\u0120hi", "\u00c3\u00a9", "\u732b"}, {0, 1, 2}) == " hi\u00e9\u732b");
  CHECK(decoded({{"type", "ByteLevel"}}, {"\u00c3"}, {0}) == "\xEF\xBF\xBD");  // a lone lead byte
  const nlohmann::json fallback = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  CHECK(decoded(fallback, {"a", "<0xC3>", "<0xA9>"}, {0, 1, 2, 0}) == "a\u00e9a");
  CHECK(decoded(fallback, {"a", "<0xC3>", "<0xA9>"}, {1, 1, 0}) == "\xEF\xBF\xBD\xEF\xBF\xBD" "a");  // one U+FFFD per byte
  const nlohmann::json metaspace = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  CHECK(decoded(metaspace, {"\u2581hi", "\u2581there"}, {0, 1}) == "hi there");
  const nlohmann::json metaspace_never = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}};
  CHECK(decoded(metaspace_never, {"\u2581hi", "\u2581there"}, {0, 1}) == " hi there");
  // Llama's decoder chain: spaces back, bytes back, joined, one leading space stripped.
  const nlohmann::json llama = {{"type", "Sequence"},
                                {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                              {{"type", "ByteFallback"}},
                                              {{"type", "Fuse"}},
                                              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  CHECK(decoded(llama, {"\u2581hi", "\u2581there", "<0x21>"}, {0, 1, 2}) == "hi there!");
  CHECK(decoded(llama, {"\u2581\u2581hi"}, {0}) == " hi");  // Strip takes at most `start` copies
}
