// The settings engine::keys_without_effect names (which a resumed batch or compare does not compare,
// batch_manifest.h) really cannot change an image: every one of them changed at once gives the same tokens,
// for each method's kind of settings. A setting with an effect changed the same way does change them, so the
// comparison is one that can fail.
#include <catch2/catch.hpp>

#include <map>

#include "cli_runner.h"
#include "engine/generator.h"
#include "engine/settings.h"
#include "testing/test_support.h"

using namespace sjd;

namespace {

// `s` with every key of keys_without_effect(s) set to another valid value.
engine::GenerationSettings with_other_values(engine::GenerationSettings s, const std::string& cost_profile) {
  const std::map<std::string, nlohmann::json> other = {
      {"window", 5},         {"init", "sample-left"},     {"pd_k", 3},
      {"pd_depth", 2},       {"delta", 7.0},              {"nu", 0.7},
      {"lantern_k", 3},      {"lantern_lambda", 1.5},     {"lantern_own_residual", true},
      {"batch_size", 3},     {"cost_profile", cost_profile}, {"temperature", 0.5},
      {"negative_prompt", "a large green ring on a red background"},
  };
  nlohmann::json layer = nlohmann::json::object();
  for (const std::string& key : engine::keys_without_effect(s)) {
    INFO(key);
    REQUIRE(other.count(key) == 1);  // a key added there needs a value here
    layer[key] = other.at(key);
  }
  engine::apply_settings(s, layer, "test");
  return s;
}

}  // namespace

TEST_CASE("settings without effect on an image do not change its tokens", "[engine][settings][resume]") {
  testing::TempDir dir("without_effect");
  // Windows priced far above an AR step: a planner that read it would decode token by token.
  testing::write_file(dir / "dear.json", R"({"name": "dear", "rows": 2, "points": [[1, 1.0], [128, 5000.0]]})");
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::GenerationSettings base;
  engine::apply_settings(base, bundle.defaults, "bundle defaults");
  base.seed = 3;
  engine::Generator generator(std::move(bundle));
  const std::string prompt = "a small red square on the left, on a blue background";

  // ar; greedy jacobi; sjd and sjd-pac with fixed windows (and a fixed tree), one relaxed; scd-mc planned.
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"ar", {{"method", "ar"}}},
      {"jacobi", {{"method", "jacobi"}, {"window", 8}}},
      {"sjd", {{"method", "sjd"}, {"window", 8}}},
      {"sjd-pac:uniform", {{"method", "sjd-pac:uniform"}, {"window", 8}, {"pd_k", 2}, {"pd_depth", 2}}},
      {"sjd-pac without a tree", {{"method", "sjd-pac"}, {"window", 8}, {"pd_k", 2}, {"pd_depth", 0}}},  // pd_k
      {"scd-mc:lantern", {{"method", "scd-mc:lantern"}}},
      {"sjd without guidance", {{"method", "sjd"}, {"window", 8}, {"cfg", 1.0}}},  // no row reads a negative prompt
  };
  for (const auto& [name, layer] : cases) {
    SECTION(name) {
      engine::GenerationSettings s = base;
      engine::apply_settings(s, layer, name);
      const engine::GenerationSettings changed = with_other_values(s, (dir / "dear.json").string());
      CHECK(settings_to_json(changed) != settings_to_json(s));
      const std::vector<int64_t> tokens = generator.generate(prompt, s).tokens;
      CHECK(generator.generate(prompt, changed).tokens == tokens);
      // The same comparison sees a setting that has an effect.
      engine::GenerationSettings other_cfg = s;
      other_cfg.cfg += 2.0;
      CHECK(generator.generate(prompt, other_cfg).tokens != tokens);
    }
  }
}

TEST_CASE("at temperature 0 a relaxation changes no token", "[engine][settings][lossy]") {
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::GenerationSettings greedy;
  engine::apply_settings(greedy, bundle.defaults, "bundle defaults");
  engine::apply_settings(greedy, {{"method", "sjd"}, {"window", 8}, {"temperature", 0}}, "test");
  engine::Generator generator(std::move(bundle));
  const std::string prompt = "a large blue circle on the left, on a yellow background";
  const engine::GenerationOutput exact = generator.generate(prompt, greedy);
  // Even Cool-SD's late weights below 1 (nu 0.7) pass the argmax draft: a token with p = 1 scores at least 1.
  for (const nlohmann::json& relaxed : {nlohmann::json{{"relax", "cool"}, {"delta", 1.5}, {"nu", 0.7}},
                                        nlohmann::json{{"relax", "lantern"}, {"lantern_lambda", 50.0}},
                                        nlohmann::json{{"relax", "uniform"}, {"delta", 10.0}}}) {
    INFO(relaxed.dump());
    engine::GenerationSettings s = greedy;
    engine::apply_settings(s, relaxed, "test");
    const engine::GenerationOutput out = generator.generate(prompt, s);
    CHECK(out.tokens == exact.tokens);
    CHECK(out.stats.steps == exact.stats.steps);
    CHECK(out.method.exactness() == decoding::Exactness::kGreedy);
  }
  // The same relaxation above temperature 0 does change them (the comparison can fail).
  engine::GenerationSettings sampled = greedy;
  engine::apply_settings(sampled, {{"relax", "uniform"}, {"delta", 10.0}, {"temperature", 0.8}}, "test");
  engine::GenerationSettings lossless = sampled;
  lossless.relax = "none";
  CHECK(generator.generate(prompt, sampled).tokens != generator.generate(prompt, lossless).tokens);
}

TEST_CASE("a guidance scale that is 1 in float decodes no unconditional row", "[engine][settings][cfg]") {
  const std::string prompt = "a small red square on the left, on a blue background";
  // A fresh generator per scale: its model keeps the largest KV cache it has reserved.
  const auto run = [&](double cfg) {
    engine::Bundle bundle = engine::load_bundle(testing::default_model());
    engine::GenerationSettings s;
    engine::apply_settings(s, bundle.defaults, "bundle defaults");
    engine::apply_settings(s, {{"method", "sjd"}, {"window", 8}, {"cfg", cfg}}, "test");
    s.seed = 3;
    engine::Generator generator(std::move(bundle));
    std::vector<int64_t> tokens = generator.generate(prompt, s).tokens;
    return std::make_pair(tokens, generator.transformer().held_bytes());
  };
  const auto [tokens_at_1, cache_at_1] = run(1.0);
  const auto [tokens_near_1, cache_near_1] = run(1.0 + 1e-9);  // the same float
  CHECK(tokens_near_1 == tokens_at_1);
  CHECK(cache_near_1 == cache_at_1);
  // A scale that mixes holds a second row (the comparison can fail).
  CHECK(run(1.5).second > cache_at_1);
}
