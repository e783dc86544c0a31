// The tokenizer.json BPE model: merges in both formats, byte fallback, unknown
// tokens, subword affixes, and the errors malformed files give.
#include <catch2/catch.hpp>

#include "hf_test_files.h"

using sjd::testing::TempDir;
using sjd::testing::write_file;
using sjd::text::testing::bpe_tokenizer;
using sjd::text::testing::load_bpe;
using sjd::text::testing::token_strings;
using Strings = std::vector<std::string>;
using Ids = std::vector<int64_t>;

TEST_CASE("BPE merges apply by rank, in both merge formats", "[text][bpe]") {
  TempDir dir("bpe_merges");
  const Strings vocab = {"a", "b", "c", "ab", "bc"};
  // "a b" ranks before "b c": a b c -> ab c. Swapping the ranks gives a bc.
  const auto ab_first = bpe_tokenizer(vocab, {"a b", "b c"});
  CHECK(token_strings(*load_bpe(dir, ab_first, "ab_first.json"), ab_first, "abc") == Strings{"ab", "c"});
  const auto bc_first = bpe_tokenizer(vocab, {"b c", "a b"});
  CHECK(token_strings(*load_bpe(dir, bc_first, "bc_first.json"), bc_first, "abc") == Strings{"a", "bc"});
  auto pairs = bc_first;
  pairs["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"b", "c"}), nlohmann::json::array({"a", "b"})});
  CHECK(token_strings(*load_bpe(dir, pairs, "pairs.json"), pairs, "abc") == Strings{"a", "bc"});
  // merges.txt's "#version" header line is not a merge.
  auto versioned = ab_first;
  versioned["model"]["merges"] = {"#version: 0.2", "a b", "b c"};
  CHECK(token_strings(*load_bpe(dir, versioned, "versioned.json"), versioned, "abc") == Strings{"ab", "c"});
}

TEST_CASE("BPE byte fallback spells unknown characters as <0xNN> tokens", "[text][bpe]") {
  TempDir dir("bpe_byte_fallback");
  auto document = bpe_tokenizer({"a", "<0xC3>", "<0xA9>", "<unk>"}, {});
  document["model"]["byte_fallback"] = true;
  document["model"]["unk_token"] = "<unk>";
  document["decoder"] = {{"type", "Sequence"},
                         {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  const auto tokenizer = load_bpe(dir, document);
  CHECK(token_strings(*tokenizer, document, "aé") == Strings{"a", "<0xC3>", "<0xA9>"});
  // 猫 is E7 8C AB: no byte tokens for it, so the unknown token stands in.
  CHECK(token_strings(*tokenizer, document, "a猫") == Strings{"a", "<unk>"});
  CHECK(tokenizer->decode(tokenizer->encode("aéa")) == "aéa");
  CHECK(tokenizer->decode({1}) == "\xEF\xBF\xBD");  // a lone lead byte decodes to U+FFFD
}

TEST_CASE("BPE unknown tokens fuse when fuse_unk is set, without unk_token they are dropped", "[text][bpe]") {
  TempDir dir("bpe_unknown");
  auto separate = bpe_tokenizer({"a", "<unk>"}, {});
  separate["model"]["unk_token"] = "<unk>";
  CHECK(token_strings(*load_bpe(dir, separate, "separate.json"), separate, "a猫猫a") == Strings{"a", "<unk>", "<unk>", "a"});
  auto fused = separate;
  fused["model"]["fuse_unk"] = true;
  CHECK(token_strings(*load_bpe(dir, fused, "fused.json"), fused, "a猫猫a") == Strings{"a", "<unk>", "a"});
  const auto dropping = bpe_tokenizer({"a", "b"}, {});
  CHECK(token_strings(*load_bpe(dir, dropping, "dropping.json"), dropping, "a猫b") == Strings{"a", "b"});
}

TEST_CASE("BPE continuing-subword prefix and end-of-word suffix", "[text][bpe]") {
  TempDir dir("bpe_affixes");
  auto prefixed = bpe_tokenizer({"a", "##b", "##c", "ab"}, {"a ##b"});
  prefixed["model"]["continuing_subword_prefix"] = "##";
  CHECK(token_strings(*load_bpe(dir, prefixed, "prefixed.json"), prefixed, "abc") == Strings{"ab", "##c"});
  auto suffixed = bpe_tokenizer({"a", "b</w>", "ab</w>"}, {"a b</w>"});
  suffixed["model"]["end_of_word_suffix"] = "</w>";
  CHECK(token_strings(*load_bpe(dir, suffixed, "suffixed.json"), suffixed, "ab") == Strings{"ab</w>"});
}

TEST_CASE("BPE token_id and decode cover the vocabulary, no decoder joins tokens with spaces", "[text][bpe]") {
  TempDir dir("bpe_lookup");
  const auto document = bpe_tokenizer({"a", "b", "ab"}, {"a b"});
  const auto tokenizer = load_bpe(dir, document);
  CHECK(tokenizer->token_id("ab") == 2);
  CHECK_FALSE(tokenizer->token_id("ba").has_value());
  CHECK(tokenizer->decode({2, 0}) == "ab a");
  CHECK_THROWS_WITH(tokenizer->decode({3}), Catch::Contains("id 3 is not in the vocabulary"));
  CHECK_THROWS_WITH(tokenizer->encode("a\xFF"), Catch::Contains("not valid UTF-8 at byte 2"));
}

TEST_CASE("malformed tokenizer.json files give errors naming the file and key", "[text][bpe]") {
  TempDir dir("bpe_malformed");
  const auto fails_with = [&](const nlohmann::json& document, const std::string& message) {
    INFO(document.dump());
    CHECK_THROWS_WITH(load_bpe(dir, document, "broken.json"),
                      Catch::Contains("broken.json") && Catch::Contains(message));
  };
  const auto good = bpe_tokenizer({"a", "b", "ab"}, {"a b"});
  auto document = good;
  document.erase("model");
  fails_with(document, "missing key \"model\"");
  document = good;
  document["model"]["merges"] = {"a b", "a x"};
  fails_with(document, "model.merges[1]: \"x\" is not in model.vocab");
  document["model"]["merges"] = {"a b c"};
  fails_with(document, "model.merges[0]: expected two tokens separated by one space");
  document["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a"})});
  fails_with(document, "model.merges[0]: expected a pair of tokens");
  document = good;
  document["model"]["vocab"]["dup"] = 1;
  fails_with(document, "model.vocab.dup: id 1 is also the id of \"b\"");
  document = good;
  document["model"]["vocab"]["a"] = "zero";
  fails_with(document, "model.vocab.a: expected an integer");
  document = good;
  document["model"]["type"] = "WordPiece";
  fails_with(document, "model.type: unsupported model \"WordPiece\"");
  document = good;
  document["model"]["dropout"] = 0.1;
  fails_with(document, "model.dropout: BPE dropout is not supported");
  document["model"]["dropout"] = "x";  // was taken for a dropout rate
  fails_with(document, "model.dropout: expected a number or null, found \"x\"");
  document = good;
  document["model"]["unk_token"] = "<unk>";
  fails_with(document, "model.unk_token: unknown token \"<unk>\" is not in model.vocab");
  document = good;
  document["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  fails_with(document, "pre_tokenizer.type: unsupported pre-tokenizer \"BertPreTokenizer\"");
  document["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(open"}}}, {"behavior", "Isolated"}, {"invert", false}};
  fails_with(document, "pre_tokenizer.pattern.Regex: invalid regular expression");
  document["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Merged"}, {"invert", false}};
  fails_with(document, "pre_tokenizer.behavior: unknown split behavior \"Merged\"");
  document = good;
  document["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}};
  fails_with(document, "normalizer.normalizers[1].type: unsupported normalizer \"Precompiled\"");
  document = good;
  document["decoder"] = {{"type", "WordPiece"}};
  fails_with(document, "decoder.type: unsupported decoder \"WordPiece\"");
  document = good;
  document["added_tokens"] = {{{"id", 9}, {"content", ""}}};
  fails_with(document, "added_tokens[0].content: an added token cannot be empty");
  document["added_tokens"] = {{{"id", 9}, {"content", "<x>"}}, {{"id", 10}, {"content", "<x>"}}};
  fails_with(document, "added_tokens[1].content: \"<x>\" is the content of ids 9 and 10");

  write_file(dir / "not_json.json", "{\"model\": ");
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("bpe", dir / "not_json.json", {}),
                    Catch::Contains("not_json.json: invalid JSON"));
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("bpe", dir / "absent.json", {}), Catch::Contains("absent.json: cannot open"));
  // Decoders that matched everywhere without moving on: decode() never returned.
  document = good;
  document["decoder"] = {{"type", "Metaspace"}, {"replacement", ""}};
  fails_with(document, "decoder.replacement: must not be empty");
  document["decoder"] = {{"type", "Strip"}, {"content", ""}, {"start", int64_t{1} << 62}, {"stop", 0}};
  fails_with(document, "decoder.content: must not be empty");
  // A second "model" replaced the first without a word (a whole vocabulary lost).
  write_file(dir / "twice.json", "{\"model\": " + good["model"].dump() + ", \"model\": {}}");
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("bpe", dir / "twice.json", {}),
                    Catch::Contains("twice.json: key \"model\" appears twice in one object"));
  // Nested steps took memory quadratic in the depth (8000 levels: 1.8 GB).
  std::string nested = R"({"type": "Whitespace"})";
  for (int i = 0; i < 100; ++i) nested = R"({"type": "Sequence", "pretokenizers": [)" + nested + "]}";
  write_file(dir / "deep.json", "{\"pre_tokenizer\": " + nested + ", \"model\": " + good["model"].dump() + "}");
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("bpe", dir / "deep.json", {}),
                    Catch::Contains("deep.json: values nested more than 64 levels deep"));
  // Files are bounded before they are read (a 275 MB tokenizer.json aborted sjd).
  write_file(dir / "huge.json", "{");
  std::filesystem::resize_file(dir / "huge.json", std::uintmax_t{100} << 20);
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("bpe", dir / "huge.json", {}),
                    Catch::Contains("huge.json: a tokenizer file of 100 MiB, more than one can be (at most 64 MiB)"));
  write_file(dir / "good.json", good.dump());
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("bpe", dir / "good.json", {{"specials", true}}),
                    Catch::Contains("specials: unknown key"));
}
