// The Emu3 family glue: the generated sequence's shape at Emu3-Gen's real ids
// (8193 tokens at 720 px), the prompt rows, the resolution rule and the errors.
// The expected ids below are the release's (configuration_emu3.py defaults:
// eol 151846, eof 151847, bos 151849, eos 151850, image token 151851, image
// start 151852, image end 151853, visual tokens 151854..184621), written out
// here rather than derived from the code under test.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "family/emu3_family.h"
#include "testing/test_support.h"
#include "text/tokenizer.h"

using namespace sjd;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kVocab = 184622, kEol = 151846, kEof = 151847, kBos = 151849, kEos = 151850;
constexpr int64_t kImageToken = 151851, kImageStart = 151852, kImageEnd = 151853, kVisual0 = 151854;
const std::string kPositive = " masterpiece, film grained, best quality.";
const std::string kNegative = "lowres, bad anatomy.";

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t j = 0; j < 3; ++j) v = v << 8 | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? alphabet[(v >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

// A byte-only tiktoken vocabulary (rank = byte value) with Emu3's special tokens at their real ids.
struct Emu3Tokenizer {
  testing::TempDir dir{"emu3_family"};
  std::unique_ptr<text::Tokenizer> tokenizer;
  Emu3Tokenizer() {
    std::string lines;
    for (int b = 0; b < 256; ++b) lines += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
    testing::write_file(dir / "emu3.tiktoken", lines);
    const nlohmann::json specials = {{"<|extra_200|>", kEol},          {"<|extra_201|>", kEof},
                                     {"<|extra_203|>", kBos},          {"<|extra_204|>", kEos},
                                     {"<|image token|>", kImageToken}, {"<|image start|>", kImageStart},
                                     {"<|image end|>", kImageEnd},     {"<|visual token 000000|>", kVisual0},
                                     {"<|visual token 032767|>", kVocab - 1}};
    tokenizer = text::load_tokenizer("tiktoken", dir / "emu3.tiktoken", {{"special_tokens", specials}});
  }
};

nlohmann::json release_layout() {
  return {{"kind", "emu3"},
          {"image_area", 720 * 720},
          {"max_positions", 9216},
          {"codebook_size", 32768},
          {"tokens",
           {{"bos", "<|extra_203|>"},
            {"eos", "<|extra_204|>"},
            {"image_start", "<|image start|>"},
            {"image_end", "<|image end|>"},
            {"image_token", "<|image token|>"},
            {"eol", "<|extra_200|>"},
            {"eof", "<|extra_201|>"},
            {"visual_first", "<|visual token 000000|>"},
            {"visual_last", "<|visual token 032767|>"}}},
          {"positive_prompt", kPositive},
          {"negative_prompt", kNegative},
          {"size_template", "{H}*{W}"}};
}

family::Emu3Family make(const Emu3Tokenizer& t, const nlohmann::json& layout, int64_t resolution = 0) {
  return family::Emu3Family(family::parse_emu3_config(layout, 8, resolution, "bundle.json: layout"), *t.tokenizer,
                            kVocab, "bundle.json: layout");
}

std::vector<int64_t> bytes_of(const std::string& text) {
  std::vector<int64_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string error_of(const Emu3Tokenizer& t, const nlohmann::json& layout, int64_t resolution = 0) {
  try {
    make(t, layout, resolution);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("emu3 at 720 px generates 90 rows of 90 codes + eol, then eof, image end, eos: 8193 tokens",
          "[family][emu3]") {
  const Emu3Tokenizer t;
  const auto emu3 = make(t, release_layout());
  const family::TokenLayout& layout = emu3.layout();
  REQUIRE(layout.length() == 8193);
  CHECK(layout.grid_height() == 90);
  CHECK(layout.grid_width() == 90);
  CHECK(emu3.image_height() == 720);
  CHECK(emu3.image_width() == 720);
  for (int64_t t = 0; t < 90 * 91; ++t) {
    const int64_t row = t / 91, col = t % 91;
    if (col == 90) {
      REQUIRE(layout.forced(t) == kEol);
      REQUIRE(layout.cell(t) == -1);
    } else {
      REQUIRE(layout.forced(t) == -1);
      REQUIRE(layout.cell(t) == row * 90 + col);
    }
  }
  CHECK(layout.forced(8190) == kEof);
  CHECK(layout.forced(8191) == kImageEnd);
  CHECK(layout.forced(8192) == kEos);
  // Free slots allow exactly the visual tokens.
  const auto constraint = layout.constraint(0);
  CHECK(constraint.forced == -1);
  CHECK(constraint.allowed.sum().item<int64_t>() == 32768);
  CHECK(constraint.allowed[kVisual0].item<bool>());
  CHECK(constraint.allowed[kVocab - 1].item<bool>());
  CHECK_FALSE(constraint.allowed[kVisual0 - 1].item<bool>());
  CHECK(layout.constraint(90).forced == kEol);
  CHECK(emu3.cfg_mix() == sampling::CfgMix::kLogProbs);
}

TEST_CASE("emu3 codes come out row-major from the visual tokens", "[family][emu3]") {
  const Emu3Tokenizer t;
  const auto emu3 = make(t, release_layout(), 64);  // 8x8 grid keeps the check short
  std::vector<int64_t> sequence;
  for (int64_t row = 0; row < 8; ++row) {
    for (int64_t col = 0; col < 8; ++col) sequence.push_back(kVisual0 + 1000 * row + 7 * col);
    sequence.push_back(kEol);
  }
  sequence.insert(sequence.end(), {kEof, kImageEnd, kEos});
  REQUIRE(static_cast<int64_t>(sequence.size()) == emu3.layout().length());
  const at::Tensor codes = emu3.layout().codes(sequence);
  REQUIRE(codes.sizes() == at::IntArrayRef{8, 8});
  CHECK(codes[3][5].item<int64_t>() == 3000 + 35);
  CHECK(codes[7][0].item<int64_t>() == 7000);
}

TEST_CASE("emu3 prompt rows: bos + text + image start + H*W + image token, positions from 0", "[family][emu3]") {
  const Emu3Tokenizer t;
  const auto emu3 = make(t, release_layout());
  std::vector<int64_t> tail = {kImageStart};
  for (int64_t id : bytes_of("90*90")) tail.push_back(id);
  tail.push_back(kImageToken);

  std::vector<int64_t> expected = {kBos};
  for (int64_t id : bytes_of("a red fox" + kPositive)) expected.push_back(id);
  expected.insert(expected.end(), tail.begin(), tail.end());
  const model::RowPrompt cond = emu3.conditional("a red fox");
  CHECK(cond.tokens == expected);
  REQUIRE(cond.positions.size() == expected.size());
  CHECK(cond.positions.front() == 0);
  CHECK(cond.positions.back() == static_cast<int64_t>(expected.size()) - 1);
  CHECK(cond.key_valid == std::vector<uint8_t>(expected.size(), 1));
  CHECK(emu3.prompt_ids("a red fox", true) == expected);
  CHECK(emu3.prompt_ids("a red fox", false) == bytes_of("a red fox"));

  // The unconditional row puts the negative prompt in the prompt's place, without the positive suffix.
  std::vector<int64_t> negative = {kBos};
  for (int64_t id : bytes_of(kNegative)) negative.push_back(id);
  negative.insert(negative.end(), tail.begin(), tail.end());
  const model::RowPrompt uncond = emu3.unconditional("");
  CHECK(uncond.tokens == negative);
  CHECK(uncond.positions.front() == 0);
  CHECK(uncond.key_valid == std::vector<uint8_t>(negative.size(), 1));
  // A user's negative prompt (--negative-prompt) takes the bundle's one's place, also without the suffix.
  std::vector<int64_t> users = {kBos};
  for (int64_t id : bytes_of("a blue dog")) users.push_back(id);
  users.insert(users.end(), tail.begin(), tail.end());
  CHECK(emu3.negative("a blue dog").tokens == users);
  CHECK(emu3.negative(kNegative).tokens == negative);

  // Special-token names inside the prompt are special tokens, as Emu3's tokenizer allows them.
  CHECK(emu3.prompt_ids("x<|extra_200|>", false) == std::vector<int64_t>{'x', kEol});
}

TEST_CASE("emu3 resolutions: multiples of 8 whose sequence fits the context", "[family][emu3]") {
  const Emu3Tokenizer t;
  const auto small = make(t, release_layout(), 64);
  CHECK(small.layout().length() == 8 * 9 + 3);
  CHECK(small.image_width() == 64);
  CHECK(small.conditional("x").tokens.size() == 1 + 1 + kPositive.size() + 1 + 3 + 1);  // "8*8"
  CHECK(make(t, release_layout(), 760).layout().length() == 95 * 96 + 3);
  CHECK_THAT(error_of(t, release_layout(), 100), Contains("resolution 100") && Contains("8-pixel") &&
                                                    Contains("96 or 104"));
  CHECK_THAT(error_of(t, release_layout(), 768), Contains("resolution 768") && Contains("9315") &&
                                                    Contains("9216") && Contains("max_positions"));
}

TEST_CASE("emu3 grid side follows the processor's rounding of sqrt(area) / 8", "[family][emu3]") {
  CHECK(family::emu3_grid_side(518400, 8) == 90);
  CHECK(family::emu3_grid_side(500000, 8) == 88);  // 707.1 / 8 = 88.4
  CHECK(family::emu3_grid_side(400, 8) == 2);      // 2.5 rounds to even, as Python's round()
  CHECK(family::emu3_grid_side(784, 8) == 4);      // 3.5 rounds to even
  const Emu3Tokenizer t;
  nlohmann::json layout = release_layout();
  layout["image_area"] = 500000;
  CHECK(make(t, layout).layout().grid_width() == 88);
}

TEST_CASE("emu3 layout errors name the key", "[family][emu3]") {
  const Emu3Tokenizer t;
  nlohmann::json layout = release_layout();
  layout["grid_height"] = 90;
  CHECK_THAT(error_of(t, layout), Contains("layout.grid_height: unknown key"));

  layout = release_layout();
  layout["kind"] = 5;  // was the JSON library's "type must be string", naming no key
  CHECK_THAT(error_of(t, layout), Contains("layout.kind: expected \"emu3\", found 5"));

  layout = release_layout();
  layout["tokens"]["bos"] = "<|extra_999|>";
  CHECK_THAT(error_of(t, layout), Contains("layout.tokens.bos") && Contains("<|extra_999|>"));

  layout = release_layout();
  layout["tokens"]["eol"] = "ab";  // ordinary text of two tokens, not a special token
  CHECK_THAT(error_of(t, layout), Contains("layout.tokens.eol"));

  layout = release_layout();
  layout["codebook_size"] = 32000;
  CHECK_THAT(error_of(t, layout), Contains("layout.tokens") && Contains("codebook_size = 32000"));

  layout = release_layout();
  layout.erase("negative_prompt");
  CHECK_THAT(error_of(t, layout), Contains("layout.negative_prompt"));

  layout = release_layout();
  layout["max_positions"] = 0;
  CHECK_THAT(error_of(t, layout), Contains("layout.max_positions"));
}

TEST_CASE("make_family builds the emu3 family from a bundle", "[family][emu3]") {
  const Emu3Tokenizer t;
  family::FamilyContext context;
  context.family = "emu3";
  context.bundle = {{"layout", release_layout()}};
  context.where = "bundle.json";
  context.tokenizer = t.tokenizer.get();
  context.vocab_size = kVocab;
  context.downsample = 8;
  context.resolution = 320;
  const auto family = family::make_family(context);
  CHECK(family->layout().length() == 40 * 41 + 3);
  CHECK(family->cfg_mix() == sampling::CfgMix::kLogProbs);
}
