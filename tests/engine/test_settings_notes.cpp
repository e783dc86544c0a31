// The notes a run prints for settings its method ignores: each names the setting and why, and a
// setting the method uses gets none.
#include <catch2/catch.hpp>

#include <algorithm>

#include "engine/settings.h"

using namespace sjd;

namespace {

engine::GenerationSettings with_method(const std::string& method) {
  engine::GenerationSettings s;
  s.method = method;
  return s;
}

}  // namespace

TEST_CASE("a note names each setting the method ignores, and none the method uses", "[engine][settings]") {
  engine::GenerationSettings s = with_method("ar");
  CHECK(engine::ignored_settings_note(s).empty());
  s.window = 4;
  CHECK(engine::ignored_settings_note(s) == "note: ar decodes one token a step, so window 4 is ignored");
  s.pd_k = 3;
  CHECK(engine::ignored_settings_note(s) ==
        "note: ar decodes one token a step, so window 4 is ignored\n"
        "note: only sjd-pac grows draft trees, so pd_k is ignored by ar");
  s.pd_depth = 2;
  CHECK_THAT(engine::ignored_settings_note(s), Catch::EndsWith("so pd_k and pd_depth are ignored by ar"));

  s = with_method("sjd");
  s.window = 4;
  CHECK(engine::ignored_settings_note(s).empty());  // sjd drafts a window
  s.pd_depth = 2;
  CHECK(engine::ignored_settings_note(s) == "note: only sjd-pac grows draft trees, so pd_depth is ignored by sjd");

  s = with_method("sjd-pac");
  s.window = 8;
  s.pd_k = 2;
  s.pd_depth = 1;
  CHECK(engine::ignored_settings_note(s).empty());
  s.pd_depth = 0;  // no tree: its width is unused
  CHECK(engine::ignored_settings_note(s) == "note: pd_depth 0 grows no draft tree, so pd_k 2 is ignored");

  s = with_method("jacobi");
  s.temperature = 0.5;
  CHECK(engine::ignored_settings_note(s) == "note: jacobi decodes greedily (argmax), so temperature 0.5 is ignored");
  CHECK(engine::ignored_settings_note(with_method("no-such-method")).empty());  // refused where the method is made
  // A value the user did not choose (the bundle's default, here 0.5) is nobody's mistake: no note.
  engine::GenerationSettings bundle_defaults;
  bundle_defaults.temperature = 0.5;
  CHECK(engine::ignored_settings_note(s, bundle_defaults).empty());
  bundle_defaults.delta = 5;
  s.delta = 5;
  CHECK(engine::ignored_settings_note(s, bundle_defaults).empty());
  s.delta = 6;
  CHECK(engine::ignored_settings_note(s, bundle_defaults) ==
        "note: jacobi runs without a relaxation (relax none), so delta 6 is ignored");
}

TEST_CASE("a note names each relaxation parameter that the relaxation in use does not read", "[engine][settings]") {
  engine::GenerationSettings s = with_method("sjd");
  s.delta = 5;
  s.nu = 1;
  CHECK(engine::ignored_settings_note(s) == "note: sjd runs without a relaxation (relax none), so delta 5 and nu 1 are ignored");
  s.relax = "cool";
  CHECK(engine::ignored_settings_note(s).empty());  // cool reads both
  s.relax = "uniform";
  CHECK(engine::ignored_settings_note(s) == "note: sjd runs relaxation uniform, so nu 1 is ignored");
  s.relax = "lantern";
  s.lantern_k = 3;
  s.lantern_lambda = 0.5;
  CHECK(engine::ignored_settings_note(s) == "note: sjd runs relaxation lantern, so delta 5 and nu 1 are ignored");
  s.relax = "cool";
  s.lantern_own_residual = true;
  CHECK(engine::ignored_settings_note(s) ==
        "note: sjd runs relaxation cool, so lantern_k 3, lantern_lambda 0.5 and lantern_own_residual are ignored");
}

TEST_CASE("a note names ar's init and a step-cost profile that fixed windows do not read", "[engine][settings]") {
  engine::GenerationSettings s = with_method("ar");
  s.init = "sample-up";
  CHECK(engine::ignored_settings_note(s) == "note: ar decodes one token a step, so init sample-up is ignored");
  s.window = 4;
  s.cost_profile = "p.json";
  CHECK(engine::ignored_settings_note(s) ==
        "note: ar decodes one token a step, so window 4, init sample-up and cost_profile p.json are ignored");
  s = with_method("sjd");
  s.cost_profile = "p.json";
  CHECK(engine::ignored_settings_note(s).empty());  // an automatic window reads it
  s.window = 16;
  CHECK(engine::ignored_settings_note(s) == "note: the window and any draft tree are fixed, so cost_profile "
                                            "p.json is ignored: only automatic windows read it");
  s.method = "sjd-pac";
  CHECK(engine::ignored_settings_note(s).empty());  // its tree is still automatic
  std::vector<std::string> keys = engine::keys_without_effect(s);
  CHECK(std::find(keys.begin(), keys.end(), "cost_profile") == keys.end());
  s.pd_k = 2;  // one given alone keeps the other's default: a fixed tree
  CHECK_THAT(engine::ignored_settings_note(s), Catch::Contains("so cost_profile p.json is ignored"));
  keys = engine::keys_without_effect(s);
  CHECK(std::find(keys.begin(), keys.end(), "cost_profile") != keys.end());
}

TEST_CASE("a note says a relaxation changes no token at temperature 0", "[engine][settings]") {
  engine::GenerationSettings s = with_method("sjd");
  s.relax = "cool";
  CHECK(engine::ignored_settings_note(s).empty());
  s.temperature = 0.0;
  CHECK(engine::ignored_settings_note(s) ==
        "note: at temperature 0 (argmax decoding) relaxation cool changes no token: the image is greedy, not lossy");
  CHECK(engine::method_from_settings(s).exactness() == decoding::Exactness::kGreedy);
  s.temperature = 0.5;
  CHECK(engine::method_from_settings(s).exactness() == decoding::Exactness::kLossy);
}

TEST_CASE("an image's identity leaves out the settings that cannot change it", "[engine][settings]") {
  engine::GenerationSettings s = with_method("ar");
  s.window = 4;
  s.pd_k = 2;
  s.cost_profile = "p.json";
  s.device = "cuda";
  nlohmann::json identity = engine::identity_settings(s);
  for (const char* key : {"window", "init", "pd_k", "pd_depth", "delta", "nu", "lantern_k", "lantern_lambda",
                          "lantern_own_residual", "batch_size", "cost_profile", "device"}) {
    CHECK_FALSE(identity.contains(key));
  }
  for (const char* key : {"method", "relax", "cfg", "temperature", "top_k", "seed", "resolution", "dtype"}) {
    CHECK(identity.contains(key));
  }
  s = with_method("sjd-pac:cool");
  engine::split_method_entry(s);
  identity = engine::identity_settings(s);  // automatic windows and tree: the planner reads the batch size
  for (const char* key : {"window", "init", "pd_k", "pd_depth", "delta", "nu", "batch_size"}) CHECK(identity.contains(key));
  CHECK_FALSE(identity.contains("lantern_k"));
  CHECK_FALSE(identity.contains("cost_profile"));  // its content is in the identity's planning
  s.window = 16;
  s.pd_k = 3;
  s.pd_depth = 2;
  identity = engine::identity_settings(s);  // all fixed
  CHECK_FALSE(identity.contains("batch_size"));
  CHECK(identity["window"] == 16);
  s = with_method("jacobi");
  CHECK_FALSE(engine::identity_settings(s).contains("temperature"));
  CHECK(engine::keys_without_effect(with_method("no-such-method")).empty());
}

TEST_CASE("a negative prompt is part of an image's identity where guidance reads it, and noted where not",
          "[engine][settings]") {
  engine::GenerationSettings s = with_method("sjd");
  s.cfg = 1.5;
  CHECK(engine::identity_settings(s)["negative_prompt"] == "");
  s.negative_prompt = "a blue background";
  CHECK(engine::identity_settings(s)["negative_prompt"] == "a blue background");
  CHECK(engine::ignored_settings_note(s).empty());
  s.cfg = 1.0;
  CHECK_FALSE(engine::identity_settings(s).contains("negative_prompt"));
  CHECK(engine::ignored_settings_note(s) == "note: cfg 1 decodes without a guidance row, so negative_prompt is ignored");
  // A config layer's text is checked as -p's is: valid UTF-8, not blank.
  CHECK_THROWS_WITH(engine::apply_settings(s, {{"negative_prompt", "   "}}, "c.json"),
                    Catch::Contains("c.json") && Catch::Contains("negative_prompt") && Catch::Contains("blank"));
  CHECK_THROWS_WITH(engine::apply_settings(s, {{"negative_prompt", std::string("ok \xff")}}, "c.json"),
                    Catch::Contains("/negative_prompt: has invalid UTF-8 at byte 4"));
  CHECK_THROWS_WITH(engine::apply_settings(s, {{"negative_prompt", std::string("a\0b", 3)}}, "c.json"),
                    Catch::Contains("/negative_prompt: has a NUL byte at byte 2"));
  CHECK_THROWS_WITH(engine::apply_settings(s, {{"negative_prompt", std::string((size_t{1} << 20) + 1, 'a')}}, "c.json"),
                    Catch::Contains("/negative_prompt: has a length of 1048577 bytes, more than the 1048576"));
  CHECK_THROWS_WITH(engine::apply_settings(s, {{"negative_prompt", "\u3000\u200b"}}, "c.json"),
                    Catch::Contains("/negative_prompt: is blank"));
  CHECK_THROWS_WITH(engine::apply_settings(s, {{"negative_prompt", 3}}, "c.json"),
                    Catch::Contains("/negative_prompt: expected a string"));
  engine::apply_settings(s, {{"negative_prompt", ""}}, "c.json");  // "" unsets it
  CHECK(s.negative_prompt.empty());
}

TEST_CASE("a warning names the first prompt line that carries settings, and counts them", "[engine][settings]") {
  std::vector<io::PromptEntry> prompts = {{"a cat", 1, {"id"}}, {"a dog", 3, {}}};
  CHECK(engine::prompt_file_settings_warning(prompts, "p.jsonl").empty());  // "id" is not a setting
  prompts.push_back({"a cow", 4, {"id", "seed", "cfg"}});
  prompts.push_back({"a hen", 5, {"method"}});
  CHECK(engine::prompt_file_settings_warning(prompts, "p.jsonl") ==
        "p.jsonl:4: \"seed\", \"cfg\" are settings, which a prompt file does not set (2 line(s) hold some): the "
        "seeds run from --seed, the rest come from flags, --config or the bundle");
}

TEST_CASE("a method named without a relaxation is the lossless one, also after a relaxed one", "[engine][settings]") {
  engine::GenerationSettings s;
  engine::apply_settings(s, {{"method", "sjd-pac:cool"}}, "config.json");
  CHECK(s.relax == "cool");
  engine::apply_settings(s, {{"cfg", 2.0}}, "later.json");  // a layer without a method keeps it
  CHECK(s.relax == "cool");
  engine::apply_settings(s, {{"method", "sjd"}}, "later.json");
  CHECK(s.method == "sjd");
  CHECK(s.relax == "none");
  engine::apply_settings(s, {{"method", "sjd"}, {"relax", "uniform"}}, "same.json");  // the same layer's relax wins
  CHECK(s.relax == "uniform");
}
