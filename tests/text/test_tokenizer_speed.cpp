// Gross speed limits for the Qwen tokenizer (targets: load < 0.5 s, a 100-word
// prompt < 1 ms; the limits here are 4x looser so that a busy machine does not fail them).
#include <catch2/catch.hpp>

#include <chrono>

#include "testing/test_support.h"
#include "text/tokenizer.h"

namespace {

constexpr const char* kHundredWordPrompt =
    "A photograph of an astronaut riding a horse on the surface of the moon, with the Earth rising over the "
    "horizon behind them, rendered in the style of a vintage oil painting with warm golden light, soft brush "
    "strokes, dramatic shadows, and a sense of quiet wonder; the horse is white with a flowing mane, the "
    "astronaut wears a classic white suit with a reflective gold visor, dust kicks up from the hooves, distant "
    "craters dot the grey landscape, stars are faintly visible in the black sky, and the whole scene feels both "
    "absurd and majestic, like a dream remembered at dawn by a child who loves space.";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("Qwen tiktoken loads in well under a second and encodes a prompt in about a millisecond", "[text][speed]") {
  const auto file = sjd::testing::source_dir().parent_path() / "shared" / "data" / "tokenizers" / "qwen" / "qwen.tiktoken";
  if (!std::filesystem::exists(file)) {
    WARN("skipped: " << file << " is absent (the shared data folder is not on this machine)");
    return;
  }
  double best_load = 1e9;
  std::unique_ptr<sjd::text::Tokenizer> tokenizer;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    tokenizer = sjd::text::load_tokenizer("tiktoken", file, {{"qwen_specials", true}});
    best_load = std::min(best_load, seconds_since(start));
  }
  INFO("best load time " << best_load << " s");
  CHECK(best_load < 2.0);

  constexpr int kRuns = 200;
  std::size_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int run = 0; run < kRuns; ++run) tokens += tokenizer->encode(kHundredWordPrompt).size();
  const double per_prompt_ms = seconds_since(start) * 1000.0 / kRuns;
  INFO("encoding the 100-word prompt takes " << per_prompt_ms << " ms");
  CHECK(tokens == kRuns * tokenizer->encode(kHundredWordPrompt).size());
  CHECK(per_prompt_ms < 4.0);
}
