// The settings table (engine/setting_fields.h) is the one list of settings: a config layer naming
// every key reads into the right members and writes back unchanged, each bounded key is held to its
// range by the key's own name, and every key has its flag on the command line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "cli_runner.h"
#include "engine/setting_fields.h"
#include "engine/settings.h"
#include "engine/settings_checks.h"

using namespace sjd;

namespace {

// A value for every setting, none of them the built-in default, all of them allowed.
nlohmann::json every_setting_changed() {
  return {{"method", "sjd-pac"},  {"window", 12},        {"init", "sample-up"}, {"pd_k", 3},
          {"pd_depth", 2},        {"relax", "cool"},     {"delta", 1.5},        {"nu", 0.25},
          {"lantern_k", 7},       {"lantern_lambda", 2.5}, {"lantern_own_residual", true},
          {"cfg", 4.5},           {"negative_prompt", "a dark background"}, {"temperature", 0.7},  {"top_k", 99},         {"seed", 18446744073709551615ull},
          {"resolution", 256},    {"device", "cuda:1"},  {"dtype", "bf16"},     {"cost_profile", "p.json"},
          {"batch_size", 5}};
}

}  // namespace

TEST_CASE("a layer naming every setting reads into its own members and writes back unchanged", "[engine][settings]") {
  const nlohmann::json layer = every_setting_changed();
  REQUIRE(layer.size() == engine::setting_keys().size());  // the case covers the whole table

  const nlohmann::json defaults = engine::settings_to_json(engine::GenerationSettings{});
  engine::GenerationSettings read;
  engine::apply_settings(read, layer, "layer.json");
  const nlohmann::json written = engine::settings_to_json(read);
  for (const std::string& key : engine::setting_keys()) {
    INFO(key);
    CHECK(defaults.at(key) != layer.at(key));  // so a value read into the wrong member shows
    CHECK(written.at(key) == layer.at(key));
  }
  CHECK(written.size() == layer.size());

  // "auto" counts write back as "auto".
  engine::GenerationSettings automatic;
  engine::apply_settings(automatic, {{"window", "auto"}, {"batch_size", "auto"}}, "layer.json");
  CHECK(engine::settings_to_json(automatic).at("window") == "auto");
  CHECK(engine::settings_to_json(automatic).at("batch_size") == "auto");
}

TEST_CASE("every bounded setting is refused just past its range, naming the layer and key", "[engine][settings]") {
  int bounded = 0;
  for (const engine::SettingField& field : engine::setting_fields()) {
    nlohmann::json past;
    std::visit(
        [&past](const auto& kind) {
          using Kind = std::decay_t<decltype(kind)>;
          if constexpr (std::is_same_v<Kind, engine::CountSetting>) {
            past = kind.hi + 1;
          } else if constexpr (std::is_same_v<Kind, engine::NumberSetting>) {
            past = kind.hi * 1.5;
          } else if constexpr (std::is_same_v<Kind, engine::IntegerSetting<int>> ||
                               std::is_same_v<Kind, engine::IntegerSetting<int64_t>>) {
            past = static_cast<int64_t>(kind.hi) + 1;
          }
        },
        field.kind);
    if (past.is_null()) continue;  // names, flags and the seed (any 64-bit integer) have no range
    ++bounded;
    INFO(field.key << " = " << past.dump());
    engine::GenerationSettings s;
    try {
      engine::apply_settings(s, {{field.key, past}}, "layer.json");
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::StartsWith("layer.json: /" + std::string(field.key) + ": "));
    }
  }
  CHECK(bounded >= 10);  // cfg, temperature, top_k, window, the tree's and relaxations' numbers...
}

TEST_CASE("every setting has its long flag, the key with '-' for '_'", "[engine][settings][cli]") {
  const testing::CommandResult help = testing::run_sjd("generate --help");
  REQUIRE(help.exit_code == 0);
  for (std::string key : engine::setting_keys()) {
    std::replace(key.begin(), key.end(), '_', '-');
    INFO(key);
    CHECK(help.out.find("--" + key + " ") != std::string::npos);
  }
}

TEST_CASE("the flag --lantern-own-residual switches lantern to its own residual, and says so", "[engine][settings][cli]") {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "sjd_test_own_residual.png";
  const std::string run = "generate --model " + testing::shell_quoted(testing::default_model()) +
                          " -p 'a red fox' --method sjd:lantern --window 4 -o " + testing::shell_quoted(out);
  const testing::CommandResult plain = testing::run_sjd(run);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(plain.out, Catch::Contains("relax=lantern, k=10, lambda=4)"));
  const testing::CommandResult own = testing::run_sjd(run + " --lantern-own-residual");
  REQUIRE(own.exit_code == 0);
  CHECK_THAT(own.out, Catch::Contains("relax=lantern, k=10, lambda=4, own residual)"));
  std::filesystem::remove(out);
}
