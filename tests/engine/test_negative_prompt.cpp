// --negative-prompt: the text of the classifier-free guidance row. It replaces the family's own
// unconditional row, changes the image, decodes in a batch as it does alone, and is part of a
// batch's identity, so a folder is never resumed with another one.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "engine/generator.h"
#include "io/png_chunks.h"
#include "testing/test_support.h"

using namespace sjd;
using namespace sjd::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kPrompt = "a small red circle on the left and a large blue square on the right, on a yellow background";

// The image data of a PNG (its IDAT chunks): equal pixels give equal bytes, whatever the text chunks say.
std::string pixel_bytes(const std::filesystem::path& png) {
  std::string data;
  for (const auto& chunk : io::parse_png_chunks(read_file(png), png)) {
    if (chunk.type == "IDAT") data += chunk.data;
  }
  return data;
}

std::string generate(const std::string& flags, const std::filesystem::path& image) {
  return "generate --model " + shell_quoted(default_model()) + " -p '" + kPrompt + "' --method sjd -L 8 --seed 11 -o " +
         shell_quoted(image) + " " + flags;
}

}  // namespace

TEST_CASE("a negative prompt is the guidance row in the unconditional row's place", "[engine][cfg]") {
  engine::Bundle bundle = engine::load_bundle(default_model());
  engine::GenerationSettings s;
  engine::apply_settings(s, bundle.defaults, "bundle defaults");
  engine::Generator generator(std::move(bundle));
  const family::ImageFamily& glue = generator.family();

  std::vector<model::RowPrompt> rows = engine::prompt_rows(glue, kPrompt, s);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].tokens == glue.conditional(kPrompt).tokens);
  CHECK(rows[1].tokens == glue.unconditional(kPrompt).tokens);

  s.negative_prompt = "a large green ring";
  rows = engine::prompt_rows(glue, kPrompt, s);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].tokens == glue.conditional(kPrompt).tokens);
  CHECK(rows[1].tokens == glue.negative("a large green ring").tokens);
  CHECK(rows[1].tokens != glue.unconditional(kPrompt).tokens);

  // Too long, it is named in the warning and the refusal, not the prompt (the default model: 2048 positions,
  // 1061 image tokens; 160 copies of the phrase take 1141 with the template, 300 take more than 2048).
  const auto copies = [](int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += (i > 0 ? " " : "") + std::string("a large red triangle on the left");
    return text;
  };
  s.negative_prompt = copies(160);
  CHECK_THAT(generator.context_warning(kPrompt, s),
             Catch::StartsWith("the negative prompt takes 1141 tokens and the image 1061") &&
                 Catch::EndsWith("shorten the negative prompt"));
  CHECK(generator.context_warning(copies(160), s).rfind("the prompt takes", 0) == 0);  // the longer of the two
  s.negative_prompt = copies(300);
  CHECK_THROWS_WITH(generator.generate(kPrompt, s), Catch::StartsWith("the negative prompt takes") &&
                                                        Catch::EndsWith("shorten the negative prompt"));

  s.cfg = 1.0;  // no guidance row to put it in
  CHECK(engine::prompt_rows(glue, kPrompt, s).size() == 1);
  CHECK(generator.context_warning(kPrompt, s).empty());
}

TEST_CASE("generate and batch --negative-prompt: another image, the same in a batch, recorded, and checked",
          "[cli][cfg][batch]") {
  TempDir dir("negative_prompt");
  const std::string negative = "--negative-prompt 'a blue background'";
  const auto plain = run_sjd(generate("", dir / "plain.png"));
  REQUIRE(plain.exit_code == 0);
  const auto steered = run_sjd(generate(negative + " --stats " + shell_quoted(dir / "s.json"), dir / "steered.png"));
  INFO(steered.err);
  REQUIRE(steered.exit_code == 0);
  CHECK(pixel_bytes(dir / "steered.png") != pixel_bytes(dir / "plain.png"));
  CHECK(nlohmann::json::parse(read_file(dir / "s.json"))["settings"]["negative_prompt"] == "a blue background");
  // An empty --negative-prompt undoes a config file's: the model's own guidance row again (it was refused as
  // an empty value, and only another config file could undo it).
  write_file(dir / "c.json", R"({"negative_prompt": "a blue background"})");
  const auto undone =
      run_sjd(generate("--config " + shell_quoted(dir / "c.json") + " --negative-prompt ''", dir / "undone.png"));
  INFO(undone.err);
  REQUIRE(undone.exit_code == 0);
  CHECK(pixel_bytes(dir / "undone.png") == pixel_bytes(dir / "plain.png"));

  // The first image of a batch has the batch's seed: the same image, decoded beside another prompt.
  write_file(dir / "prompts.txt", kPrompt + "\na ring\n");
  const std::string batch = batch_args(dir / "prompts.txt", dir / "out") + " --method sjd -L 8 --seed 11 --batch-size 2 ";
  const auto batched = run_sjd(batch + negative);
  INFO(batched.err);
  REQUIRE(batched.exit_code == 0);
  const std::vector<nlohmann::json> records = manifest_records(dir / "out" / "manifest.jsonl");
  REQUIRE(records.size() == 2);
  CHECK(pixel_bytes(dir / "out" / records[0]["file"].get<std::string>()) == pixel_bytes(dir / "steered.png"));

  // A folder made with one negative prompt is not resumed with another, nor with none.
  for (const std::string& other : {std::string("--negative-prompt 'a white background'"), std::string()}) {
    write_file(dir / "prompts.txt", kPrompt + "\na ring\na square\n");
    const auto resumed = run_sjd(batch + other);
    INFO(resumed.err);
    CHECK(resumed.exit_code == 2);
    CHECK_THAT(resumed.err, Contains("negative_prompt"));
  }
  // The same one resumes, making only the new prompt's image.
  const auto resumed = run_sjd(batch + negative);
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(manifest_records(dir / "out" / "manifest.jsonl").size() == 3);

  // Without guidance there is no row to put it in: said, and the image is the unguided one.
  const auto unguided = run_sjd(generate(negative + " --cfg 1", dir / "unguided.png"));
  REQUIRE(unguided.exit_code == 0);
  CHECK_THAT(unguided.err, Contains("note: cfg 1 decodes without a guidance row, so negative_prompt is ignored"));
  REQUIRE(run_sjd(generate("--cfg 1", dir / "cfg1.png")).exit_code == 0);
  CHECK(pixel_bytes(dir / "unguided.png") == pixel_bytes(dir / "cfg1.png"));

  // Text the tokenizer cannot take is refused by name, before any work.
  // (printf's octal escape: tests run under /bin/sh, which has no $'...').
  for (const std::string& bad :
       {std::string("--negative-prompt '  '"), std::string("--negative-prompt \"$(printf 'ok\\377')\"")}) {
    const auto refused = run_sjd(generate(bad, dir / "bad.png"));
    INFO(bad);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Contains("--negative-prompt"));
    CHECK_FALSE(std::filesystem::exists(dir / "bad.png"));
  }
}
