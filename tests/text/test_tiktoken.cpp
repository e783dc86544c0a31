// The tiktoken engine: the known Qwen tokenizations (when the shared data is
// present), a small hand-checked vocabulary, and malformed files.
#include <catch2/catch.hpp>

#include "testing/test_support.h"
#include "text/tiktoken_tokenizer.h"
#include "text/tokenizer.h"

using sjd::testing::TempDir;
using sjd::testing::write_file;
using sjd::text::JsonNode;
using sjd::text::TiktokenTokenizer;
using Ids = std::vector<int64_t>;

namespace {

std::filesystem::path qwen_vocabulary() {
  return sjd::testing::source_dir().parent_path() / "shared" / "data" / "tokenizers" / "qwen" / "qwen.tiktoken";
}

const nlohmann::json kQwenOptions = {{"qwen_specials", true}};

// The Qwen tokenizer, or nullptr where the shared data folder is absent.
const TiktokenTokenizer* qwen() {
  static const std::unique_ptr<TiktokenTokenizer> tokenizer = []() -> std::unique_ptr<TiktokenTokenizer> {
    if (!std::filesystem::exists(qwen_vocabulary())) return nullptr;
    return std::make_unique<TiktokenTokenizer>(qwen_vocabulary(), JsonNode(kQwenOptions, "options"));
  }();
  return tokenizer.get();
}

std::string base64(const std::string& bytes) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += alphabet[(v >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += std::string{alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += std::string{alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63], '='};
  }
  return out;
}

// A vocabulary of the 256 bytes (rank = byte) plus `merged` tokens ranked from 256 on.
std::string small_vocabulary(const std::vector<std::string>& merged) {
  std::string file;
  for (int b = 0; b < 256; ++b) file += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  for (std::size_t i = 0; i < merged.size(); ++i) file += base64(merged[i]) + " " + std::to_string(256 + i) + "\n";
  return file;
}

}  // namespace

TEST_CASE("Qwen tiktoken: the known tokenizations of the shared data README", "[text][tiktoken][qwen]") {
  const TiktokenTokenizer* tokenizer = qwen();
  if (!tokenizer) SJD_SKIP_TEST(qwen_vocabulary() << " is absent (the shared data folder is not on this machine)");
  CHECK(tokenizer->rank_count() == 151643);
  CHECK(tokenizer->encode("我是一只猫") == Ids{35946, 99639, 91680, 100472});
  CHECK(tokenizer->encode("是一只猫") == Ids{99639, 91680, 100472});
  CHECK(tokenizer->encode("print('<|endoftext|>')<|endoftext|>") == Ids{1350, 492, 151643, 863, 151643});
  Ids plain = tokenizer->encode_ordinary("print('<|endoftext|>')");
  plain.push_back(*tokenizer->token_id("<|endoftext|>"));
  CHECK(plain == Ids{1350, 11146, 91, 8691, 723, 427, 91, 79865, 151643});
  CHECK(tokenizer->encode("<|im_start|>print('<|extra_0|>')<|im_end|><|endoftext|>") ==
        Ids{151644, 1350, 492, 151646, 863, 151645, 151643});
  CHECK(tokenizer->encode("<|extra_204|>") == Ids{151850});
  CHECK(tokenizer->token_id("<|extra_204|>") == 151850);
  CHECK(tokenizer->token_id("<|im_end|>") == 151645);
}

TEST_CASE("Qwen tiktoken: NFC first, decode round trip, unknown ids refused", "[text][tiktoken][qwen]") {
  const TiktokenTokenizer* tokenizer = qwen();
  if (!tokenizer) SJD_SKIP_TEST(qwen_vocabulary() << " is absent (the shared data folder is not on this machine)");
  CHECK(tokenizer->encode("caf\x65\xCC\x81") == tokenizer->encode("caf\xC3\xA9"));  // e + combining acute == é
  const std::string text = "A photo of 2 cats 🐱 on a 'red' sofa,\n\tin 東京.<|endoftext|>";
  CHECK(tokenizer->decode(tokenizer->encode(text)) == text);
  CHECK_FALSE(tokenizer->token_id("<|extra_205|>").has_value());
  CHECK_THROWS_WITH(tokenizer->decode({151851}), Catch::Contains("id 151851"));
  CHECK_THROWS_WITH(tokenizer->encode("bad \xFF byte"), Catch::Contains("not valid UTF-8 at byte 5"));
}

TEST_CASE("Qwen tiktoken: special-token options are checked against the vocabulary", "[text][tiktoken][qwen]") {
  if (!qwen()) SJD_SKIP_TEST(qwen_vocabulary() << " is absent (the shared data folder is not on this machine)");
  const nlohmann::json colliding = {{"special_tokens", {{"<img>", 5}}}};
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("tiktoken", qwen_vocabulary(), colliding),
                    Catch::Contains("special_tokens.<img>") && Catch::Contains("takes id 5"));
  const nlohmann::json renamed = {{"qwen_specials", true}, {"special_tokens", {{"<|endoftext|>", 151999}}}};
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("tiktoken", qwen_vocabulary(), renamed),
                    Catch::Contains("given ids 151643 and 151999"));
  const nlohmann::json extra = {{"qwen_specials", true}, {"special_tokens", {{"<|image start|>", 151852}}}};
  const auto emu3 = sjd::text::load_tokenizer("tiktoken", qwen_vocabulary(), extra);
  CHECK(emu3->encode("a<|image start|>") == Ids{64, 151852});
}

TEST_CASE("tiktoken merges byte pairs lowest rank first, and a whole-token piece is kept", "[text][tiktoken]") {
  TempDir dir("tiktoken_small");
  // Ranks: "ab" 256, "bc" 257, "abc" 258, " x" 259. The split pattern keeps "abcbc" one piece.
  write_file(dir / "small.tiktoken", small_vocabulary({"ab", "bc", "abc", " x"}));
  const auto tokenizer = sjd::text::load_tokenizer("tiktoken", dir / "small.tiktoken", {});
  // a b c b c: ab (256) merges first, then the right bc (257): ab|c|bc; then ab+c = abc (258): abc|bc.
  CHECK(tokenizer->encode("abcbc") == Ids{258, 257});
  CHECK(tokenizer->encode("abc") == Ids{258});                       // the whole piece is a token
  CHECK(tokenizer->encode(" xa") == Ids{259, 'a'});                  // " x" then "a": one piece, merged
  CHECK(tokenizer->encode("cab") == Ids{'c', 256});
  CHECK(tokenizer->decode({258, 257}) == "abcbc");
  CHECK(tokenizer->token_id("bc") == 257);
}

TEST_CASE("tiktoken files: errors name the file and line", "[text][tiktoken]") {
  TempDir dir("tiktoken_bad");
  const auto load = [&](const std::string& name, const std::string& contents) {
    write_file(dir / name, contents);
    return sjd::text::load_tokenizer("tiktoken", dir / name, {});
  };
  CHECK_THROWS_WITH(load("no_rank.tiktoken", "YQ== 0\nYg==\n"), Catch::Contains("no_rank.tiktoken:2: expected"));
  CHECK_THROWS_WITH(load("bad_b64.tiktoken", "YQ== 0\n\nY!== 1\n"),
                    Catch::Contains("bad_b64.tiktoken:3: \"Y!==\" is not a base64 token"));
  CHECK_THROWS_WITH(load("bad_rank.tiktoken", "YQ== zero\n"), Catch::Contains("bad_rank.tiktoken:1: rank \"zero\""));
  CHECK_THROWS_WITH(load("dup_rank.tiktoken", "YQ== 0\nYg== 0\n"), Catch::Contains("dup_rank.tiktoken:2: rank 0 is given to two tokens"));
  CHECK_THROWS_WITH(load("dup_token.tiktoken", "YQ== 0\nYQ== 1\n"), Catch::Contains("dup_token.tiktoken:2"));
  CHECK_THROWS_WITH(load("empty.tiktoken", "\n"), Catch::Contains("empty.tiktoken: the tiktoken vocabulary has no tokens"));
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("tiktoken", dir / "missing.tiktoken", {}),
                    Catch::Contains("missing.tiktoken: cannot open"));
  write_file(dir / "fine.tiktoken", "YQ== 0\n");
  CHECK_THROWS_WITH(sjd::text::load_tokenizer("tiktoken", dir / "fine.tiktoken", {{"qwen_special", true}}),
                    Catch::Contains("qwen_special: unknown key"));
}
