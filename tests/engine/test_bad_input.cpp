// Hostile input, one case per input: every case must exit with code 2 and a
// one-line reason naming the flag, key, file or tensor -- never a trace, a
// crash, a hang or a huge allocation. Every command runs under an address-space
// cap and a time limit (run_sjd_limited), so a regression fails instead of
// eating the machine.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "io/safetensors.h"
#include "testing/test_support.h"

using namespace sjd::testing;

namespace {

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

struct BadCase {
  std::string args;
  std::string named;  // what the one-line reason must mention
};

void expect_refused(const std::vector<BadCase>& cases, int memory_mb = 1500) {
  for (const auto& [args, named] : cases) {
    const auto r = run_sjd_limited(args, memory_mb);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(named));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("[json.exception") == std::string::npos);  // the JSON library's own error code is not for users
  }
}

// Rewrites one weight file of a model copy with `edit` applied to its tensors.
void edit_weights(const std::filesystem::path& file, const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
  std::map<std::string, at::Tensor> tensors;
  for (auto& [name, tensor] : sjd::io::read_safetensors(file).tensors) tensors[name] = tensor.clone();
  edit(tensors);
  sjd::io::write_safetensors(file, tensors);
}

std::string generate(const std::filesystem::path& model, const TempDir& dir) {
  return "generate --model " + quoted(model) + " -p 'a red circle' -o " + quoted(dir / "out.png");
}

}  // namespace

TEST_CASE("non-finite, negative and unbounded settings are refused by flag", "[cli][robustness]") {
  TempDir dir("bad_flags");
  const std::string g = generate(default_model(), dir);
  expect_refused({
      {g + " --cfg nan", "--cfg"},
      {g + " --cfg inf", "--cfg"},
      {g + " --cfg 1e308", "--cfg"},
      {g + " --temperature nan", "--temperature"},
      {g + " --temperature inf", "--temperature"},
      {g + " --temperature 1e-300", "--temperature"},
      {g + " --temperature 1e-400", "--temperature: is too close to 0 for a double"},  // it decoded greedily
      {g + " --temperature ''", "--temperature: must be a decimal number (got '')"},  // CLI11 read it as 0: greedy
      {g + " --cfg ''", "--cfg: must be a decimal number"},
      {g + " --cfg ' 1'", "--cfg: must be a decimal number (got ' 1')"},  // taken, while '1 ' was refused
      {g + " --method sjd --relax uniform --delta 0x10", "--delta: must be a decimal number (got '0x10')"},
      {g + " --top-k -5", "--top-k"},
      {g + " --resolution -64", "--resolution"},
      {g + " --seed -1", "--seed"},
      {g + " --seed 99999999999999999999999", "--seed"},  // past 2^64-1, which CLI11 would take
      {g + " --top-k 99999999999999999999999", "(got 99999999999999999999999)"},  // the text, not CLI11's clamp
      {g + " --method sjd --relax lantern --lantern-k 99999999999", "--lantern-k"},
      {g + " --window 0", "--window"},
      {g + " --window 2147483647", "--window"},
      {g + " --method sjd --window 1100", "1061 tokens"},
      {g + " --method sjd-pac --pd-k 2147483647 --pd-depth 3", "--pd-k"},
      {g + " --method sjd-pac --pd-k 8 --pd-depth 6", "draft tree"},
      {g + " --method sjd --relax lantern --lantern-k -3", "--lantern-k"},
      {g + " --method sjd --relax lantern --lantern-lambda -1", "--lantern-lambda"},
      {g + " --method sjd --relax uniform --delta -1", "--delta"},
      {g + " --method sjd --relax cool --nu -0.5", "--nu"},
      {g + " --method sjd --relax lantern --lantern-k 600", "image codes"},
      {g + " --max-memory lots", "--max-memory"},
      {g + " --batch-size 1000000", "--batch-size must be an integer in [1, 1024]"},  // planned for a million rows
  });
}

TEST_CASE("integer flags outside the settings take whole decimal integers only", "[cli][robustness]") {
  TempDir dir("bad_integer_flags");
  write_file(dir / "prompts.txt", "a red circle\n");
  const std::string b = "batch --model " + quoted(default_model()) + " --prompts " + quoted(dir / "prompts.txt") +
                        " --out-dir " + quoted(dir / "out");
  const std::string c = "compare --model " + quoted(default_model()) + " --prompts " + quoted(dir / "prompts.txt") +
                        " --out-dir " + quoted(dir / "cmp");
  expect_refused({
      {b + " --limit ''", "--limit: must be an integer"},  // CLI11 read it as 0: every prompt
      {b + " --limit 0x10", "(got 0x10)"},
      {b + " --shard-count 99999999999999999999", "--shard-count: must be an integer"},
      {b + " --claim-timeout 59", "--claim-timeout must be in [60, 604800] seconds (got 59)"},
      {b + " --claim-timeout 99999999999", "--claim-timeout must be in [60, 604800]"},
      {b + " --claim-timeout ''", "--claim-timeout: must be an integer"},
      {c + " --seeds 0x2", "--seeds: must be an integer"},
      {"manifest " + quoted(dir.path()) + " --limit 1e3", "--limit: must be an integer"},
      {"bench --preset tiny --iterations ''", "--iterations: must be an integer"},
      {"bench --preset tiny --seed -1", "--seed: must be a non-negative integer (got -1)"},
      {"generate --model " + quoted(default_model()) + " -p 'a red circle' -o " + quoted(dir / "x.png") +
           " --top-k -99999999999999999999", "--top-k: must be an integer in [0, 2147483647] (got -99999999999999999999)"},
      // Past the type's range, a setting is told its own range, not the type's.
      {"generate --model " + quoted(default_model()) + " -p 'a red circle' -o " + quoted(dir / "x.png") +
           " --lantern-k 4294967296", "--lantern-k: must be an integer in [1, 1024] (got 4294967296)"},
      {b + " --limit 99999999999999999999", "--limit: must be an integer no larger than 9223372036854775807"},
      {b + " --shard-count 0", "--shard-count: must be positive (got 0)"},
      {b + " --shard-count -0", "--shard-count: must be positive (got -0)"},
      // Not an integer at all: the message names no type's limit (it said 9223372036854775807 for --top-k 1e3).
      {"generate --model " + quoted(default_model()) + " -p 'a red circle' -o " + quoted(dir / "x.png") + " --top-k 1e3",
       "--top-k: must be an integer in decimal digits (got 1e3)"},
      // An empty value (an unset shell variable) left the flag as if absent: no stats, no shard, no config.
      {b + " --shard ''", "--shard: an empty value"},
      {b + " --config ''", "--config: an empty value"},
      {"generate --model " + quoted(default_model()) + " -p 'a red circle' -o " + quoted(dir / "x.png") + " --stats ''",
       "--stats: an empty value"},
  });
  CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

TEST_CASE("settings in a config file must have the right type and range", "[cli][robustness]") {
  TempDir dir("bad_config");
  const std::string g = generate(default_model(), dir);
  std::vector<BadCase> cases;
  const std::vector<std::pair<std::string, std::string>> configs = {
      {R"({"cfg": 1e308})", "/cfg"},        {R"({"temperature": 1e400})", "invalid JSON"},
      {R"({"temperature": 1e-400})", "the number 1e-400 is too close to 0 for a double"},  // it decoded greedily
      {R"({"window": 16.7})", "/window"},   {R"({"seed": 1.5})", "/seed"},
      {R"({"seed": -1})", "/seed"},         {R"({"window": 3000000000})", "/window"},
      {R"({"window": 0})", "/window"},      {R"({"lantern_k": -2})", "/lantern_k"},
      {R"({"method": 5})", "/method"},      {R"({"top_k": "all"})", "/top_k"},
      {R"([1, 2])", "expected a JSON object"},
      // Names too are named by file and key, with what was meant.
      {R"({"method": "sjd-pak"})", "/method: unknown method 'sjd-pak' -- did you mean 'sjd-pac'"},
      {R"({"init": "repeat-upp"})", "/init: unknown init scheme"},
      {R"({"relax": "coool"})", "/relax: unknown relaxation 'coool'"},
      {R"({"method": "sjd-pac:cooll"})", "/method: unknown relaxation 'cooll'"},
      {R"({"batch_size": 5000})", "/batch_size"},
      // Only "auto" is a string: no other integer key takes "4" either.
      {R"({"window": "4"})", R"(/window: expected "auto" or an integer >= 1 (got "4"))"},
      {R"({"batch_size": " 4"})", "/batch_size"},
      {R"({"window": 4, "window": 8})", "key \"window\" appears twice in one object"},
      {R"({"window": 4,})", "invalid JSON: parse error at line 1, column 14"},
      // The bytes a parse error quotes are not passed on raw when they are not UTF-8 (U+FFFD stands for them).
      {"{\"window\": \"\xff\"}", "ill-formed UTF-8 byte; last read: '\"\xEF\xBF\xBD'"},
      // Copying or printing a value nested this deep would recurse as deep (a bundle.json like it crashed sjd).
      {"{\"cfg\": " + std::string(200000, '[') + std::string(200000, ']') + "}", "nested more than 64 levels deep"},
  };
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto file = dir / ("config" + std::to_string(i) + ".json");
    write_file(file, configs[i].first);
    cases.push_back({g + " --config " + quoted(file), configs[i].second});
  }
  std::filesystem::create_directories(dir / "config_dir");
  cases.push_back({g + " --config " + quoted(dir / "config_dir"), "config_dir"});
  expect_refused(cases);
}

TEST_CASE("input files read whole are bounded before they are read, and a value quoted back is cut short",
          "[cli][robustness]") {
  TempDir dir("input_sizes");
  // Sparse files: their size is what counts, and it takes no disk.
  const auto sparse = [&](const std::string& name, uintmax_t bytes) {
    write_file(dir / name, "{");
    std::filesystem::resize_file(dir / name, bytes);
    return dir / name;
  };
  const std::string g = generate(default_model(), dir);
  write_file(dir / "long_method.json", "{\"method\": \"" + std::string(100000, 'x') + "\"}");
  expect_refused({
      {g + " --config " + quoted(sparse("huge.json", 300000000)),
       "huge.json: config file of 300.0 MB, more than one can be (at most 16.8 MB): is this the right file?"},
      {"batch --model " + quoted(default_model()) + " --prompts " + quoted(sparse("huge.txt", 300000000)) +
           " --out-dir " + quoted(dir / "b"),
       "huge.txt: prompt file of 300.0 MB, more than one can be (at most 268.4 MB)"},
      {g + " --cost-profile " + quoted(sparse("profile.json", 20000000)), "step-cost profile of 20.0 MB"},
      // The whole 100 kB name came back in the message (and a 60 MB one, 60 MB of it).
      {g + " --config " + quoted(dir / "long_method.json"), "bytes left out ...]"},
  });
  const auto r = run_sjd_limited(g + " --config " + quoted(dir / "long_method.json"));
  CHECK(r.err.size() < 5000);
  CHECK_THAT(r.err, Catch::Contains("/method: unknown method 'xxxx"));
}

TEST_CASE("a compare of more runs than it can hold is refused before the model loads", "[cli][robustness]") {
  TempDir dir("compare_runs");
  std::string prompts;
  for (int i = 0; i < 400; ++i) prompts += "a red circle number " + std::to_string(i) + "\n";
  write_file(dir / "p.txt", prompts);
  // Out of memory (exit code 1) at 200,000 prompts x 1000 seeds x 6 methods.
  expect_refused({{"compare --model " + quoted(default_model()) + " --prompts " + quoted(dir / "p.txt") +
                       " --seeds 1000 --methods ar,sjd,sjd-pac --out-dir " + quoted(dir / "out"),
                   "400 prompts x 1000 seeds x 3 methods are 1200000 runs, more than compare holds (1000000)"}});
  CHECK_FALSE(std::filesystem::exists(dir / "out"));
}

TEST_CASE("a prompt too long for the memory is refused with the estimate, before allocating", "[cli][robustness]") {
  TempDir dir("long_prompt");
  std::string prompt;
  while (prompt.size() < 100000) prompt += "a red circle ";
  // Without layout.max_positions (it is optional for Lumina-mGPT) only the memory bounds the prompt.
  const auto model =
      default_model_copy(dir.path(), "model", [](nlohmann::json& j) { j["layout"].erase("max_positions"); });
  const std::string g = "generate --model " + quoted(model) + " -o " + quoted(dir / "out.png") + " -p '" +
                        prompt + "'";
  // It needs about 1.45 GB: 1 GB of address space above the libraries refuses it by the machine's own limit;
  // --max-memory refuses it anywhere.
  expect_refused({{g, "needs about"}, {g + " --max-memory 100M", "--max-memory 100.00 MB"}}, 1000);
  // The advice names the window only where there is one: ar's steps have none to shrink.
  const std::string small = "generate --model " + quoted(model) + " -o " + quoted(dir / "out.png") +
                            " -p 'a red circle' --max-memory 1K --method ";
  expect_refused({{small + "ar", "use a shorter prompt, or raise --max-memory"},
                  {small + "sjd", "use a shorter prompt, a smaller --window or draft tree, or raise --max-memory"}});
  CHECK_FALSE(std::filesystem::exists(dir / "out.png"));
}

TEST_CASE("under an address-space limit a generation is refused by its estimate or made, never aborted",
          "[cli][robustness]") {
  // The estimate passed by up to 30 MB while oneDNN's mappings took more, and LibTorch aborted the VQ decode (exit
  // code 134, a fatal log line). Limits fall in 10 MB steps from one that makes the image to the estimate's refusal.
  // (Far below, where LibTorch's own loading runs out, it still aborts: its allocator logs a fatal error.)
  TempDir dir("address_space");
  const std::string g = "generate --model " + quoted(default_model()) + " -o " + quoted(dir / "out.png") +
                        " -p 'a red circle'";
  bool made = false, refused = false;
  for (int extra_mb = 400; extra_mb >= 0 && !refused; extra_mb -= 10) {
    // One thread: the margin the check keeps grows with the threads (capped at 8, which 400 MB would not cover).
    const int64_t cap_kb = (extra_mb + own_address_space_mb()) * int64_t{1024};
    const CommandResult r = run_sjd_env("ulimit -v " + std::to_string(cap_kb) + "; OMP_NUM_THREADS=1 timeout 120", g);
    INFO("limit: this process's address space + " << extra_mb << " MB; stderr: " << r.err);
    refused = r.exit_code == 2 && r.err.find("this generation needs about") != std::string::npos;
    made = made || r.exit_code == 0;
    CHECK((r.exit_code == 0 || refused));
  }
  CHECK(made);
  CHECK(refused);
}

TEST_CASE("broken bundles are refused naming the file and key", "[cli][robustness]") {
  TempDir dir("bad_bundles");
  using J = nlohmann::json;
  const std::vector<std::pair<std::function<void(J&)>, std::string>> edits = {
      {[](J& j) { j = J::array({1, 2}); }, "expected a JSON object"},
      {[](J& j) { j["version"] = "1"; }, "version"},
      {[](J& j) { j["name"] = 5; }, "\"name\""},
      {[](J& j) { j["transformer"]["norm_eps"] = -1e-5; }, "norm_eps"},
      {[](J& j) { j["transformer"]["rope_theta"] = 0; }, "rope_theta"},
      {[](J& j) { j["transformer"]["vocab_size"] = 1000000000000; },
       "transformer.vocab_size: expected a positive integer no larger than 16777216, found 1000000000000"},
      {[](J& j) { j["transformer"]["grid_width"] = 16.7; },  // was read as 16
       "transformer.grid_width: expected a non-negative integer no larger than 16777216, found 16.7"},
      {[](J& j) { j["transformer"]["qk_norm"] = "yes"; }, "qk_norm"},
      {[](J& j) { j["vq"]["codebook_size"] = 0; }, "codebook_size"},
      {[](J& j) { j["layout"]["kind"] = "mystery"; }, "layout.kind"},
      {[](J& j) { j["layout"]["prompt_template"] = "Generate an image"; }, "{prompt}"},
      {[](J& j) { j["layout"]["prompt_template"] = "{prompt} {bogus}"; }, "unknown placeholder {bogus}"},
      {[](J& j) { j["layout"]["max_positions"] = 10; },
       "layout.max_positions: 10 positions leave none for the prompt: the image alone is 1061 generated tokens"},
      {[](J& j) { j["layout"]["grid_height"] = "16"; }, "grid_height"},
      {[](J& j) { j["vq"]["codebook_size"] = 256; }, "is larger than vq.codebook_size 256"},
      // 600 codes from id 4 run over the structure tokens 516..519.
      {[](J& j) { j["layout"]["codebook_size"] = 600; }, "layout.begin_image_id: id 517 lies inside the image codes"},
      {[](J& j) { j["transformer"]["weights"] = "/etc/passwd"; }, "must be a file name relative"},
      {[](J& j) { j["vq"]["weights"] = J::array({"../default/vqgan.safetensors"}); }, "climbs out"},
      {[](J& j) { j["tokenizer"]["file"] = 7; }, "tokenizer.file"},
      {[](J& j) { j["tokenizer"].erase("file"); }, "tokenizer.file: missing"},
      {[](J& j) { j["tokenizer"]["kind"] = 5; }, "tokenizer.kind: expected"},
      {[](J& j) { j["tokenizer"]["extra"] = 1; }, "bundle.json: tokenizer: extra: unknown key"},
      {[](J& j) { j["vq"]["kind"] = 5; }, "vq.kind"},
      // Unknown kinds named no file (they failed where the tokenizer or decoder was made).
      {[](J& j) { j["tokenizer"]["kind"] = "foo"; }, "bundle.json: tokenizer.kind: unknown kind \"foo\" (known: byte"},
      {[](J& j) { j["vq"]["kind"] = "foo"; }, "bundle.json: vq.kind: unknown VQ decoder \"foo\" (known: chameleon-vqgan"},
      {[](J& j) { j["layout"]["codebook_size"] = 1000000000000000; }, "layout.image_token_first and codebook_size"},
      {[](J& j) { j["layout"]["grid_height"] = int64_t{1} << 62; }, "layout.grid_height: 4611686018427387904 codes"},
      {[](J& j) { j["layout"]["grid_width"] = int64_t{1} << 62; }, "layout.grid_width: 4611686018427387904 codes"},
      // The weights are right, the bundle's numbers wrong: the shape error names the keys it follows from.
      {[](J& j) { j["vq"]["ch"] = 1000000000000000; }, "the expected tensors follow from"},
      {[](J& j) { j["vq"]["ch"] = 1000000000000000; }, "\"ch\":1000000000000000"},
      {[](J& j) { j["vq"]["num_res_blocks"] = 3; }, "bundle.json: vq: {"},
      {[](J& j) { j["defaults"] = J::array(); }, "defaults"},
      {[](J& j) { j["defaults"]["cfg"] = -3; }, "defaults: /cfg"},
  };
  std::vector<BadCase> cases;
  for (size_t i = 0; i < edits.size(); ++i) {
    const auto model = default_model_copy(dir.path(), "m" + std::to_string(i), edits[i].first);
    cases.push_back({generate(model, dir), edits[i].second});
  }
  // A huge number in bundle.json is not valid JSON for a double.
  const auto overflow = default_model_copy(dir.path(), "overflow");
  std::string text = read_file(overflow / "bundle.json");
  text.replace(text.find("\"norm_eps\": 1e-05"), 17, "\"norm_eps\": 1e999");
  write_file(overflow / "bundle.json", text);
  cases.push_back({generate(overflow, dir), "bundle.json"});
  // Shard names in the index are confined to the bundle too.
  const auto shard = default_model_copy(dir.path(), "shard");
  std::string index = read_file(shard / "model.safetensors.index.json");
  const std::string listed = "\"model.safetensors\"";
  for (size_t at = index.find(listed); at != std::string::npos; at = index.find(listed, at)) {
    index.replace(at, listed.size(), "\"/etc/passwd\"");
  }
  write_file(shard / "model.safetensors.index.json", index);
  cases.push_back({generate(shard, dir), "must be a file name relative"});
  // bundle.json that is a folder, a model folder that is a symlink loop.
  std::filesystem::create_directories(dir / "folder_json" / "bundle.json");
  cases.push_back({generate(dir / "folder_json", dir), "is a directory"});
  std::filesystem::create_symlink(dir / "loop_b", dir / "loop_a");
  std::filesystem::create_symlink(dir / "loop_a", dir / "loop_b");
  cases.push_back({generate(dir / "loop_a", dir), "loop_a"});
  // inspect reads every step-cost profile, a GPU's on a CPU machine too (falling points here).
  const auto profile = default_model_copy(dir.path(), "profile", [](J& j) {
    j["step_cost"]["cuda-bf16"] = {{"name", "bad"}, {"rows", 2}, {"points", J::array({J::array({4, 1.0}), J::array({1, 2.0})})}};
  });
  cases.push_back({"inspect --model " + quoted(profile), "/step_cost/cuda-bf16"});
  expect_refused(cases);
}

TEST_CASE("unusable weights are refused naming the tensor", "[cli][robustness]") {
  TempDir dir("bad_weights");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  using Tensors = std::map<std::string, at::Tensor>;
  const std::vector<std::tuple<std::string, std::function<void(Tensors&)>, std::string>> edits = {
      {"model.safetensors", [&](Tensors& t) { t["lm_head.weight"][3][5] = nan; }, "lm_head.weight"},
      {"model.safetensors", [&](Tensors& t) { t["model.norm.weight"][0] = INFINITY; }, "model.norm.weight"},
      {"model.safetensors", [&](Tensors& t) { t["model.embed_tokens.weight"][9][1] = nan; }, "embed_tokens"},
      {"vqgan.safetensors", [&](Tensors& t) { t["quantize.embedding.weight"][0][0] = nan; }, "quantize.embedding"},
      {"model.safetensors",
       [](Tensors& t) { t["model.layers.4.mlp.up_proj.weight"] = t["model.layers.3.mlp.up_proj.weight"].clone(); },
       "layers.4"},
      {"model.safetensors",
       [](Tensors& t) { t["model.norm.weight"] = t["model.norm.weight"].view(at::kInt); }, "floating point"},
      // Finite, but past what the arithmetic holds: found once the logits overflow (it was exit code 1, naming
      // no tensor).
      {"model.safetensors",
       [](Tensors& t) { t["model.layers.0.mlp.down_proj.weight"].mul_(1e37); },
       "the weights overflow f32 arithmetic (the largest is tensor 'model.layers.0.mlp.down_proj.weight'"},
  };
  std::vector<BadCase> cases;
  for (size_t i = 0; i < edits.size(); ++i) {
    const auto& [file, edit, named] = edits[i];
    const auto model = default_model_copy(dir.path(), "w" + std::to_string(i));
    edit_weights(model / file, edit);
    cases.push_back({generate(model, dir), named});
  }
  expect_refused(cases);
  // A batch stops there too: every image shares the weights.
  write_file(dir / "prompts.txt", "a red circle\na blue ring\n");
  const auto batch = run_sjd_limited("batch --model " + quoted(dir / ("w" + std::to_string(edits.size() - 1))) +
                                     " --prompts " + quoted(dir / "prompts.txt") + " --out-dir " + quoted(dir / "b"));
  CHECK(batch.exit_code == 2);
  CHECK_THAT(batch.err, Catch::Contains("the weights overflow f32 arithmetic"));
}

TEST_CASE("a tokenizer whose ids run past the model's vocabulary is refused", "[cli][robustness]") {
  TempDir dir("bad_tokenizer");
  const auto model = default_model_copy(dir.path(), "m");
  auto tokenizer = nlohmann::json::parse(read_file(model / "tokenizer.json"));
  for (auto& [piece, id] : tokenizer["model"]["vocab"].items()) {
    if (id.get<int64_t>() > 100) id = id.get<int64_t>() + 5000;  // ids beyond the 1024 rows
  }
  write_file(model / "tokenizer.json", tokenizer.dump());
  // tokenize printed such ids with exit code 0.
  // --json-lines and inspect's text rows printed them, or failed with ATen's "index out of range in self".
  write_file(dir / "lines.jsonl", "\"a red circle\"\n");
  write_file(dir / "text.json", R"({"rows": [{"text": "a red circle"}]})");
  write_file(dir / "negative.json", R"({"rows": [{"negative": "a red circle"}]})");
  const std::string vocabulary = "outside the model's vocabulary of 1024 (transformer.vocab_size)";
  expect_refused({{generate(model, dir), "vocabulary"},
                  {"tokenize --model " + quoted(model) + " 'a red circle'", vocabulary},
                  {"tokenize --model " + quoted(model) + " --json-lines " + quoted(dir / "lines.jsonl"),
                   "lines.jsonl, string 1: " + model.string()},
                  {"inspect --model " + quoted(model) + " --logits " + quoted(dir / "text.json") + " --out " +
                       quoted(dir / "t.safetensors"),
                   "rows[0]: " + model.string()},
                  {"inspect --model " + quoted(model) + " --logits " + quoted(dir / "negative.json") + " --out " +
                       quoted(dir / "n.safetensors"),
                   vocabulary}});
}

namespace {

std::string repeated(const std::string& text, int times) {
  std::string all;
  for (int i = 0; i < times; ++i) all += text;
  return all;
}

}  // namespace

TEST_CASE("inspect requests with bad ids, shapes or types are refused", "[cli][robustness]") {
  TempDir dir("bad_inspect");
  const std::string base = "inspect --model " + quoted(default_model()) + " --out " + quoted(dir / "o.safetensors");
  const std::vector<std::pair<std::string, std::string>> logits = {
      {R"({"rows": [{"tokens": [1, 99999]}]})", "99999"},
      {R"({"rows": [{"tokens": [-1]}]})", "-1"},
      {R"({"rows": []})", "rows"},
      {R"({"rows": [{"tokens": []}]})", "tokens"},
      {R"({"rows": [{"tokens": [1, 2]}], "window": [5000]})", "window"},
      {R"({"rows": [{"text": 5}]})", "o_5.json"},
      {R"([1])", "rows"},
      // A byte of 300 (44) and a dropped "tokens" went by without a word.
      {R"({"rows": [{"tokens": [1, 2, 3], "key_valid": [300, 1, 0]}]})", "rows[0].key_valid: 300 is not 0 or 1"},
      {R"({"rows": [{"tokens": [1, 2], "positions": [0, 99999999]}]})", "rows[0].positions: 99999999 is not a position in [0, 8192)"},
      {R"({"rows": [{"uncond": false, "prompt": "b"}]})", R"(rows[0]: the unconditional row is {"uncond": true, "prompt": ...})"},
      {R"({"rows": [{"uncond": true, "prompt": 5}]})", "rows[0].prompt: expected a string"},
      {R"({"rows": [{"text": ["a"]}]})", "rows[0].text: expected a string"},
      {R"({"rows": [{"text": "a cat", "tokens": [1, 2]}]})", "rows[0]: a row is {\"text\"}"},
      {R"({"rows": [{"negative": "a cat", "text": "a dog"}]})", "rows[0]: a row is {\"text\"}"},
      {R"({"rows": [{"negative": ""}]})", "rows[0].negative: expected a non-empty string"},
      {R"({"rows": [{"negative": "  "}]})", "rows[0].negative: is blank"},
      {R"({"rows": [{"negative": "\u3000\u200b"}]})", "rows[0].negative: is blank"},
      // A text row's tokens are held to a tokens row's 8192 (a 100 KB text ran a forward for minutes).
      {R"({"rows": [{"text": ")" + repeated("a red circle, ", 3000) + R"("}]})", "rows[0]: the text takes"},
  };
  const std::vector<std::pair<std::string, std::string>> decode = {
      {R"({"codes": [[1, 2], [3]]})", "codes[1]"},
      {R"({"codes": []})", "codes"},
      {R"({"codes": [[]]})", "codes[0]: an empty row of codes"},  // said "the first row's 0 codes"
      {R"({"codes": [[1, 512]]})", "512"},
      {R"({"codes": "x"})", "codes"},
  };
  std::vector<BadCase> cases;
  for (size_t i = 0; i < logits.size(); ++i) {
    const auto file = dir / ("o_" + std::to_string(i) + ".json");
    write_file(file, logits[i].first);
    cases.push_back({base + " --logits " + quoted(file), logits[i].second});
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    const auto file = dir / ("d_" + std::to_string(i) + ".json");
    write_file(file, decode[i].first);
    cases.push_back({base + " --decode " + quoted(file), decode[i].second});
  }
  // A grid of valid codes far larger than the model draws: about 17 GB to decode, refused before allocating.
  nlohmann::json huge = {{"codes", nlohmann::json::array()}};
  for (int r = 0; r < 64; ++r) huge["codes"].push_back(std::vector<int>(1024, 1));
  write_file(dir / "huge.json", huge.dump());
  cases.push_back({base + " --decode " + quoted(dir / "huge.json"), "decoding a 64x1024 grid of codes needs about"});
  // Rows without end, and a forward too large for the memory (it aborted in the allocator), refused before it.
  nlohmann::json many_rows = {{"rows", nlohmann::json::array()}};
  for (int r = 0; r < 257; ++r) many_rows["rows"].push_back({{"tokens", {1}}});
  write_file(dir / "many_rows.json", many_rows.dump());
  cases.push_back({base + " --logits " + quoted(dir / "many_rows.json"), "1 to 256 rows"});
  nlohmann::json long_rows = {{"rows", nlohmann::json::array()}, {"window", std::vector<int>(8000, 5)}};
  for (int r = 0; r < 64; ++r) long_rows["rows"].push_back({{"tokens", std::vector<int>(8000, 5)}});
  write_file(dir / "long_rows.json", long_rows.dump());
  cases.push_back({base + " --logits " + quoted(dir / "long_rows.json"), "memory"});
  expect_refused(cases);
}

TEST_CASE("a blank or broken -p prompt and a bundle.json given as the model are refused, naming them",
          "[cli][robustness]") {
  // A prompt file's blank prompt was refused while -p "" made an image; a bad byte was counted
  // in the family's template and blamed on the tokenizer.
  TempDir dir("bad_prompt_flag");
  const std::string model = " --model " + quoted(default_model());
  const std::string out = " -o " + quoted(dir / "x.png");
  expect_refused({
      {"generate" + model + " -p ''" + out, "-p: the prompt is blank"},
      {"generate" + model + " -p '  '" + out, "-p: the prompt is blank"},
      // Ideographic spaces, a no-break space and a zero width space show nothing, yet made an image.
      {"generate" + model + " -p \"$(printf '\343\200\200 \302\240\342\200\213')\"" + out,
       "-p: the prompt is blank"},
      {"generate" + model + " -p \"$(printf 'caf\\351')\"" + out, "-p: the prompt is not valid UTF-8 at byte 4"},
      {"compare" + model + " -p ' ' --out-dir " + quoted(dir / "c"), "-p: the prompt is blank"},
      // tokenize said "tokenizer .../tokenizer.json: ... at byte 3", counting from 0 and blaming the file.
      {"tokenize" + model + " \"$(printf 'caf\351')\"", "sjd: the text is not valid UTF-8 at byte 4"},
      {"generate --model " + quoted(default_model() / "bundle.json") + " -p x" + out,
       "a file, not a model directory (give the folder that holds it: " + default_model().string()},
  });
  CHECK_FALSE(std::filesystem::exists(dir / "x.png"));
}

TEST_CASE("outputs that are not regular files or share a path, and both -p and --prompts, are refused", "[cli][robustness]") {
  TempDir dir("bad_outputs");
  const std::string g = "generate --model " + quoted(default_model()) + " -p 'a red circle' -o ";
  REQUIRE(::mkfifo((dir / "fifo.png").c_str(), 0644) == 0);
  write_file(dir / "elsewhere.png", "keep me");
  std::filesystem::create_symlink(dir / "elsewhere.png", dir / "link.png");
  write_file(dir / "a_file", "x");
  write_file(dir / "prompts.txt", "a red circle\n");
  expect_refused({
      {g + quoted(dir / "fifo.png"), "FIFO"},
      {g + quoted(dir / "link.png"), "symbolic link"},
      {g + "/dev/null", "device"},
      {"batch --model " + quoted(default_model()) + " --prompts " + quoted(dir / "prompts.txt") + " --out-dir " +
           quoted(dir / "a_file"),
       "a_file"},
      {"compare --model " + quoted(default_model()) + " -p x --prompts " + quoted(dir / "prompts.txt"), "--prompts"},
      {"batch --model " + quoted(default_model()) + " --prompts " + quoted(dir / "fifo.png") + " --out-dir " +
           quoted(dir / "o"),
       "FIFO"},
      // Once refused at the rename, after the image was made.
      {g + quoted(dir / (std::string(260, 'n') + ".png")), "the output's name is 264 bytes, more than the 255"},
      {g + quoted(dir / "x.png") + " --stats " + quoted(dir / (std::string(256, 's') + ".json")),
       "the output's name is 261 bytes"},
  });
  // Two outputs on one path: the second write would replace the image (or the stats) without a word.
  write_file(dir / "made.png", "an image made before");
  expect_refused({
      {g + quoted(dir / "made.png") + " --stats " + quoted(dir / "made.png"), "-o and --stats name the same file"},
      {g + quoted(dir / "made.png") + " --heatmap " + quoted(dir / "sub" / ".." / "made.png"),
       "-o and --heatmap name the same file"},
      {g + quoted(dir / "x.png") + " --stats " + quoted(dir / "s.json") + " --tokens " + quoted(dir / "s.json"),
       "--stats and --tokens name the same file"},
  });
  CHECK(read_file(dir / "made.png") == "an image made before");
  // A folder no file can be created in fails before the image is made, so a made image is not lost to a
  // --stats that cannot be written (/proc refuses root too).
  const auto unwritable = run_sjd(g + quoted(dir / "made.png") + " --stats /proc/s.json --method ar");
  CHECK(unwritable.exit_code == 2);
  CHECK_THAT(unwritable.err, Catch::Contains("--stats /proc/s.json: /proc: cannot create files in this folder"));
  CHECK(read_file(dir / "made.png") == "an image made before");
  struct stat info {};
  REQUIRE(::lstat((dir / "fifo.png").c_str(), &info) == 0);
  CHECK(S_ISFIFO(info.st_mode));
  CHECK(std::filesystem::is_symlink(dir / "link.png"));
  CHECK(read_file(dir / "elsewhere.png") == "keep me");
}

TEST_CASE("no output replaces a file of the model bundle or an input of the run", "[cli][robustness]") {
  TempDir dir("outputs_spare_inputs");
  const auto model = default_model_copy(dir.path(), "m");
  const std::string weights_before = read_file(model / "model.safetensors");
  const std::string bundle_before = read_file(model / "bundle.json");
  const std::string config_before = read_file(model / "config.json");
  write_file(dir / "c.json", "{\"seed\": 3}");
  write_file(dir / "prompts.txt", "a red circle\n");
  write_file(dir / "req.json", "{\"rows\": [{\"text\": \"a red circle\"}], \"window\": []}");
  const std::string g = "generate --model " + quoted(model) + " -p 'a red circle' -o " + quoted(dir / "x.png");
  const std::string on_prompts = " --prompts " + quoted(dir / "prompts.txt");
  write_file(dir / "cmp" / "keep.txt", "");  // compare's folder, with the config where compare.json goes
  write_file(dir / "cmp" / "compare.json", "{\"seed\": 3}");
  expect_refused({
      {g + " --stats " + quoted(model / "model.safetensors"), "a file of the model bundle"},
      {g + " --tokens " + quoted(model / "." / "bundle.json"), "a file of the model bundle"},
      // Another bundle than the run's, and a command that reads none (bench --json bundle.json replaced it).
      {"generate --model " + quoted(default_model()) + " -p 'a red circle' -o " + quoted(dir / "x.png") + " --stats " +
           quoted(model / "config.json"), "a file of the model bundle"},
      {"bench --iterations 1 --json " + quoted(model / "bundle.json"), "a file of the model bundle"},
      {g + " --stats " + quoted(dir / "c.json") + " --config " + quoted(dir / "c.json"), "the file --config reads"},
      {"inspect --model " + quoted(model) + " --logits " + quoted(dir / "req.json") + " --out " + quoted(dir / "req.json"),
       "the file --logits reads"},
      {"inspect --model " + quoted(model) + " --logits " + quoted(dir / "req.json") + " --out " +
           quoted(model / "model.safetensors"), "a file of the model bundle"},
      {"batch --model " + quoted(model) + on_prompts + " --out-dir " + quoted(model), "in the model bundle's folder"},
      {"compare --model " + quoted(model) + on_prompts + " --methods ar --out-dir " + quoted(dir / "cmp") +
           " --config " + quoted(dir / "cmp" / "compare.json"), "the file --config reads"},
  });
  CHECK(read_file(model / "model.safetensors") == weights_before);
  CHECK(read_file(model / "bundle.json") == bundle_before);
  CHECK(read_file(model / "config.json") == config_before);
  CHECK(read_file(dir / "req.json").find("rows") != std::string::npos);
  CHECK(read_file(dir / "cmp" / "compare.json") == "{\"seed\": 3}");
  CHECK_FALSE(std::filesystem::exists(model / "manifest.jsonl"));
}

TEST_CASE("a weight file that is a FIFO is refused without waiting for a writer", "[cli][robustness]") {
  TempDir dir("fifo_weights");
  const auto model = default_model_copy(dir.path(), "m");
  std::filesystem::remove(model / "model.safetensors");
  REQUIRE(::mkfifo((model / "model.safetensors").c_str(), 0644) == 0);
  expect_refused({{generate(model, dir), "not a regular file"}});
  const auto vq = default_model_copy(dir.path(), "v");
  std::filesystem::remove(vq / "vqgan.safetensors");
  REQUIRE(::mkfifo((vq / "vqgan.safetensors").c_str(), 0644) == 0);
  expect_refused({{generate(vq, dir), "FIFO"}});
}

TEST_CASE("seeds that would pass 2^64 - 1 are refused, not wrapped to 0", "[cli][robustness]") {
  TempDir dir("seed_wrap");
  write_file(dir / "p.txt", "a red circle\na blue square\n");
  const std::string top = " --seed 18446744073709551615";
  expect_refused({
      {"batch --model " + quoted(default_model()) + " --prompts " + quoted(dir / "p.txt") + " --out-dir " +
           quoted(dir / "b") + top,
       "2 prompts would pass 2^64 - 1"},
      {"compare --model " + quoted(default_model()) + " -p x --seeds 2 --out-dir " + quoted(dir / "c") + top,
       "--seeds 2 would pass 2^64 - 1"},
  });
}

TEST_CASE("a resolution the bundle cannot draw is refused before the weights load, naming where it was asked for",
          "[cli][robustness]") {
  TempDir dir("bad_resolution");
  // The weights are broken on purpose: the resolution's refusal comes first.
  const auto model = default_model_copy(dir.path(), "m");
  write_file(model / "model.safetensors", "");
  write_file(dir / "prompts.txt", "a red circle\n");
  write_file(dir / "config.json", R"({"resolution": 96})");
  const auto bundle_default = default_model_copy(dir.path(), "d", [](nlohmann::json& j) { j["defaults"]["resolution"] = 72; });
  const std::string g = generate(model, dir);
  expect_refused({
      {g + " --resolution 77", "--resolution 77: " + (model / "bundle.json").string() + ": layout: resolution 77 is not supported (supported: 128)"},
      {g + " --config " + quoted(dir / "config.json"), (dir / "config.json").string() + ": resolution 96: "},
      {generate(bundle_default, dir), "bundle.json: defaults: resolution 72: "},
      {"batch --model " + quoted(model) + " --prompts " + quoted(dir / "prompts.txt") + " --out-dir " +
           quoted(dir / "b") + " --resolution 77",
       "--resolution 77: "},
      {"compare --model " + quoted(model) + " -p 'a red circle' --methods ar,sjd --out-dir " + quoted(dir / "c") +
           " --resolution 77",
       "--resolution 77: "},
  });
  CHECK_FALSE(std::filesystem::exists(dir / "b"));
}
