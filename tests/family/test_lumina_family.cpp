// The Lumina-mGPT family glue at the release's real ids and geometry. The ids
// below are written out from the release's vocabulary (and Lumina's
// inference_solver.py, which hard-codes the same numbers: image tokens 4..8195,
// end-of-turn 8710, size tokens 8804 + pixels / 32), not derived from the code
// under test: <racm3:break> 8197, <eoss> 8196, <reserved08799> 8803.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <limits>
#include <string>
#include <vector>

#include "family/image_family.h"
#include "family/lumina_family.h"
#include "text/tokenizer.h"

using namespace sjd;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kVocab = 65536, kBos = 0, kFirstImage = 4, kLastImage = 8195, kEndImage = 8196;
constexpr int64_t kBeginImage = 8197, kEndOfTurn = 8710, kNewline = 8803, kSize768 = 8828;
constexpr int64_t kTextFirst = 9000;  // the test's byte tokenizer: byte b -> 9000 + b

nlohmann::json release_layout() {
  return {{"kind", "lumina-mgpt"},
          {"grid_height", 48},
          {"grid_width", 48},
          {"image_token_first", kFirstImage},
          {"codebook_size", 8192},
          {"bos_id", kBos},
          {"begin_image_id", kBeginImage},
          {"end_image_id", kEndImage},
          {"newline_id", kNewline},
          {"end_of_turn_id", kEndOfTurn},
          {"size_token_base", 8804},
          {"size_token_unit_px", 32},
          {"resolutions", {512, 768, 1024}},
          {"prompt_template", "Generate an image of {width}x{height} according to the following prompt:\n{prompt}"}};
}

struct Lumina {
  std::unique_ptr<text::Tokenizer> tokenizer = text::load_tokenizer("byte", "", {{"first_id", kTextFirst}});
  std::unique_ptr<family::ImageFamily> make(int64_t resolution, nlohmann::json layout = release_layout()) const {
    family::FamilyContext c;
    c.family = "lumina-mgpt";
    c.bundle = {{"layout", layout}};
    c.where = "lumina/bundle.json";
    c.tokenizer = tokenizer.get();
    c.vocab_size = kVocab;
    c.downsample = 16;
    c.resolution = resolution;
    return family::make_family(c);
  }
};

// The expected sequence shape, spelled out: begin-image, height, width, rows of
// (codes + newline), end-image, end-of-turn.
std::vector<int64_t> expected_forced(int64_t grid, int64_t size_token) {
  std::vector<int64_t> forced = {kBeginImage, size_token, size_token};
  for (int64_t r = 0; r < grid; ++r) {
    for (int64_t c = 0; c < grid; ++c) forced.push_back(-1);
    forced.push_back(kNewline);
  }
  forced.push_back(kEndImage);
  forced.push_back(kEndOfTurn);
  return forced;
}

}  // namespace

TEST_CASE("lumina 768 px: 2357 generated tokens with the structure forced at the right slots", "[lumina]") {
  const auto glue = Lumina().make(0);
  const family::TokenLayout& layout = glue->layout();
  REQUIRE(layout.length() == 2357);  // 3 + 48 * 49 + 2
  REQUIRE(glue->image_height() == 768);
  REQUIRE(glue->image_width() == 768);
  const std::vector<int64_t> expected = expected_forced(48, kSize768);
  REQUIRE(static_cast<int64_t>(expected.size()) == 2357);
  int64_t image_slots = 0;
  for (int64_t t = 0; t < layout.length(); ++t) {
    INFO("generated index " << t);
    REQUIRE(layout.forced(t) == expected[static_cast<size_t>(t)]);
    const sampling::SlotConstraint constraint = layout.constraint(t);
    REQUIRE(constraint.forced == expected[static_cast<size_t>(t)]);
    if (expected[static_cast<size_t>(t)] < 0) {
      ++image_slots;
      REQUIRE(layout.cell(t) >= 0);
    } else {
      REQUIRE(layout.cell(t) == -1);
    }
  }
  REQUIRE(image_slots == 2304);
  REQUIRE(layout.forced(3 + 48) == kNewline);
  REQUIRE(layout.forced(3 + 47 * 49 + 48) == kNewline);
  REQUIRE(layout.forced(2355) == kEndImage);
  REQUIRE(layout.forced(2356) == kEndOfTurn);
}

TEST_CASE("lumina image slots allow exactly the 8192 image tokens 4..8195", "[lumina]") {
  const auto glue = Lumina().make(0);
  const at::Tensor allowed = glue->layout().constraint(3).allowed;
  REQUIRE(allowed.size(0) == kVocab);
  REQUIRE(allowed.sum().item<int64_t>() == 8192);
  REQUIRE(allowed.narrow(0, kFirstImage, 8192).all().item<bool>());
  REQUIRE_FALSE(allowed[kFirstImage - 1].item<bool>());
  REQUIRE_FALSE(allowed[kLastImage + 1].item<bool>());
  for (int64_t id : {kBos, kBeginImage, kEndImage, kNewline, kEndOfTurn, kSize768}) REQUIRE_FALSE(allowed[id].item<bool>());
}

TEST_CASE("lumina codes come out on the 48x48 grid, row-major, as id - 4", "[lumina]") {
  const auto glue = Lumina().make(0);
  const family::TokenLayout& layout = glue->layout();
  std::vector<int64_t> generated;
  int64_t cell = 0;
  for (int64_t forced : expected_forced(48, kSize768)) {
    generated.push_back(forced >= 0 ? forced : kFirstImage + (cell++ * 37) % 8192);
  }
  const at::Tensor codes = layout.codes(generated);
  REQUIRE(codes.sizes() == at::IntArrayRef({48, 48}));
  REQUIRE(codes[0][0].item<int64_t>() == 0);
  REQUIRE(codes[0][1].item<int64_t>() == 37);
  REQUIRE(codes[1][0].item<int64_t>() == (48 * 37) % 8192);
  REQUIRE(codes[47][47].item<int64_t>() == (2303 * 37) % 8192);
  // Neighbours on the grid, across the row-end tokens.
  REQUIRE(layout.left_of(3 + 49 + 1) == 3 + 49);
  REQUIRE(layout.up_of(3 + 49 + 5) == 3 + 5);
  REQUIRE(layout.left_of(3 + 49) == -1);

  generated[3 + 49 + 2] = kNewline;  // a structure token where a code belongs
  REQUIRE_THROWS_WITH(layout.codes(generated), Contains("generated token 54") && Contains("not an image token"));
}

TEST_CASE("lumina resolutions 512 and 1024 are accepted with their size tokens, 640 is rejected", "[lumina]") {
  const Lumina lumina;
  const auto at512 = lumina.make(512);
  REQUIRE(at512->layout().length() == 3 + 32 * 33 + 2);
  REQUIRE(at512->layout().forced(1) == 8820);
  REQUIRE(at512->layout().grid_width() == 32);
  const auto at1024 = lumina.make(1024);
  REQUIRE(at1024->layout().length() == 4165);  // the SJD paper's count at 1024 px
  REQUIRE(at1024->layout().forced(2) == 8836);
  REQUIRE(lumina.make(768)->layout().length() == 2357);
  REQUIRE_THROWS_WITH(lumina.make(640), Contains("lumina/bundle.json: layout") &&
                                            Contains("resolution 640 is not supported (supported: 512, 768, 1024)"));
  REQUIRE_THROWS_WITH(lumina.make(2048), Contains("resolution 2048 is not supported"));
  // The grid's own side is drawn whether or not resolutions lists it, and the message says so.
  nlohmann::json layout = release_layout();
  layout["resolutions"] = {1024};
  REQUIRE(lumina.make(768, layout)->layout().length() == 2357);
  REQUIRE_THROWS_WITH(lumina.make(512, layout), Contains("resolution 512 is not supported (supported: 768, 1024)"));
}

TEST_CASE("lumina refuses a max_positions that leaves no room for the shortest prompt, at its own or an asked resolution",
          "[lumina]") {
  const Lumina lumina;
  // BOS, the template around an empty prompt, end-of-turn: what every prompt row holds.
  const int64_t fewest = static_cast<int64_t>(lumina.make(0)->conditional("").tokens.size());
  REQUIRE(fewest == 1 + 64 + 1);  // 64 bytes of template
  nlohmann::json layout = release_layout();
  layout["max_positions"] = 2357 + fewest - 1;  // one position short of the image (2357 at 768 px) and the shortest prompt
  REQUIRE_THROWS_WITH(lumina.make(0, layout),
                      Contains("lumina/bundle.json: layout.max_positions: 2422 positions leave none for the prompt: "
                               "the image alone is 2357 generated tokens at 768x768 px, and the prompt template with "
                               "an empty prompt takes 66"));
  layout["max_positions"] = 2357 + fewest;
  CHECK(lumina.make(0, layout)->max_positions() == 2357 + fewest);
  CHECK(lumina.make(512, layout)->layout().length() == 1061);
  REQUIRE_THROWS_WITH(lumina.make(1024, layout), Contains("the image alone is 4165 generated tokens at 1024x1024 px"));
}

TEST_CASE("lumina refuses a template placeholder it does not fill, naming it", "[lumina]") {
  const Lumina lumina;
  nlohmann::json layout = release_layout();
  layout["prompt_template"] = "{prompt} at {widht}";
  REQUIRE_THROWS_WITH(lumina.make(0, layout),
                      Contains("lumina/bundle.json: layout.prompt_template: unknown placeholder {widht} "
                               "(known: {prompt}, {width}, {height})"));
  // Braces that are no placeholder name stay text.
  layout["prompt_template"] = "{ } {prompt} {a-b} {}";
  CHECK(lumina.make(0, layout)->conditional("x").tokens.size() > 1);
}

TEST_CASE("lumina prompt rows: BOS, the filled template, end-of-turn, the CFG row starts at begin-image", "[lumina]") {
  const Lumina lumina;
  const auto glue = lumina.make(0);
  const std::string text = "Generate an image of 768x768 according to the following prompt:\na cat";
  std::vector<int64_t> expected = {kBos};
  for (unsigned char byte : text) expected.push_back(kTextFirst + byte);
  expected.push_back(kEndOfTurn);
  const model::RowPrompt row = glue->conditional("a cat");
  REQUIRE(row.tokens == expected);
  for (size_t i = 0; i < row.positions.size(); ++i) REQUIRE(row.positions[i] == static_cast<int64_t>(i));
  REQUIRE(row.key_valid == std::vector<uint8_t>(expected.size(), 1));
  REQUIRE(glue->prompt_ids("a cat", false) == std::vector<int64_t>(expected.begin() + 65, expected.end() - 1));

  const auto at512 = lumina.make(512);
  const std::vector<int64_t> ids512 = at512->prompt_ids("x", true);
  const std::string text512 = "Generate an image of 512x512 according to the following prompt:\nx";
  REQUIRE(ids512.size() == text512.size() + 2);
  REQUIRE(ids512[22] == kTextFirst + '5');

  // The unconditional row is only a masked placeholder: generated token 0 (begin-image) gets position 0.
  const model::RowPrompt uncond = glue->unconditional("");
  REQUIRE(uncond.tokens.size() == 1);
  REQUIRE(uncond.positions == std::vector<int64_t>{-1});
  REQUIRE(uncond.key_valid == std::vector<uint8_t>{0});
  // A user's negative prompt is the conditional row of its text: the model never saw another kind of text row.
  const model::RowPrompt negative = glue->negative("a blue dog");
  CHECK(negative.tokens == glue->conditional("a blue dog").tokens);
  CHECK(negative.positions == glue->conditional("a blue dog").positions);
  CHECK(negative.tokens != glue->conditional("a red fox").tokens);
  REQUIRE(glue->cfg_mix() == sampling::CfgMix::kLogits);
  // A prompt's length is its row's: a batch measures every prompt (Generator::batch_capacity).
  REQUIRE_FALSE(glue->fixed_prompt_rows());
}

TEST_CASE("lumina layout errors name the key", "[lumina]") {
  const Lumina lumina;
  nlohmann::json layout = release_layout();
  layout["newline_id"] = kVocab;
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("lumina/bundle.json: layout.newline_id") && Contains("65536"));
  layout = release_layout();
  layout["size_token_base"] = kVocab - 10;  // 768 px would need base + 24
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("height token"));
  layout = release_layout();
  layout.erase("end_of_turn_id");
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("layout.end_of_turn_id"));
  layout = release_layout();
  layout["codebook_size"] = 1000000000000000;  // named no file or key
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("lumina/bundle.json: layout.image_token_first and codebook_size: "
                                                       "1000000000000000 image tokens from id"));
  layout = release_layout();
  layout["image_token_first"] = std::numeric_limits<int64_t>::max();  // first + size would overflow
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("do not fit the vocabulary of 65536 (transformer.vocab_size)"));
  layout = release_layout();
  layout["size_token_unit_px"] = 40;
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("768 px is not a multiple of size_token_unit_px (40)"));
  // A structure token among the image codes, or two sharing an id, were taken.
  layout = release_layout();
  layout["newline_id"] = 100;
  REQUIRE_THROWS_WITH(lumina.make(0, layout),
                      Contains("lumina/bundle.json: layout.newline_id: id 100 lies inside the image codes 4..8195"));
  layout = release_layout();
  layout["begin_image_id"] = kBos;
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("layout.begin_image_id and bos_id: both are id 0"));
  layout = release_layout();
  layout["size_token_base"] = kNewline - 24;  // the 768 px tokens land on the newline
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("(height token) and newline_id: both are id 8803"));
  // max_positions is optional (0: not recorded), and positive when given.
  layout = release_layout();
  CHECK(lumina.make(0, layout)->max_positions() == 0);
  layout["max_positions"] = 10240;
  CHECK(lumina.make(0, layout)->max_positions() == 10240);
  layout["max_positions"] = 0;
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("layout.max_positions: expected a positive integer, found 0"));
  // A negative id is refused where it is read, by the rule of every integer field.
  layout = release_layout();
  layout["bos_id"] = -1;
  REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains("layout.bos_id: expected a non-negative integer, found -1"));
  // resolutions: checked whether or not a resolution is asked for, each entry by its place.
  const std::vector<std::pair<nlohmann::json, std::string>> bad_resolutions = {
      {"512", "layout.resolutions: expected an array of image sides in pixels"},
      {{512, "768"}, "layout.resolutions[1]: expected a positive integer (pixels), found \"768\""},
      {{512, -16}, "layout.resolutions[1]: expected a positive integer"},
      {{512, 700}, "layout.resolutions[1]: 700 px is not a multiple of the VQ's downsample (16)"},
      {nlohmann::json::array({int64_t{1} << 40}),
       "layout.resolutions[0]: 68719476736 codes is past the 2048 an image side may have"},
  };
  for (const auto& [resolutions, message] : bad_resolutions) {
    layout = release_layout();
    layout["resolutions"] = resolutions;
    INFO(resolutions.dump());
    REQUIRE_THROWS_WITH(lumina.make(0, layout), Contains(message));
  }
}
