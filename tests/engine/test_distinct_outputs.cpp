// Two of generate's outputs on one path are refused however the path is written: relative,
// with "./", or absolute, before any of it exists; so is an output on an input of the run or on a
// file of the model bundle.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine/bundle.h"
#include "engine/outputs.h"
#include "testing/test_support.h"

using namespace sjd;

TEST_CASE("outputs naming one file are refused however the path is written", "[engine][outputs]") {
  // Nothing here exists, so nothing is written or resolved through a link.
  const std::filesystem::path relative = "sjd_no_such_folder/c.png";
  const std::filesystem::path absolute = std::filesystem::current_path() / relative;
  CHECK_THROWS_WITH(engine::check_outputs_apart({{"-o", relative}, {"--stats", "./" + relative.string()}}),
                    Catch::Contains("-o and --stats name the same file"));
  CHECK_THROWS_WITH(engine::check_outputs_apart({{"-o", relative}, {"--heatmap", absolute}}),
                    Catch::Contains("-o and --heatmap name the same file"));
  CHECK_THROWS_WITH(
      engine::check_outputs_apart({{"-o", relative}, {"--tokens", "sjd_no_such_folder/../sjd_no_such_folder/c.png"}}),
      Catch::Contains("-o and --tokens"));
  CHECK_NOTHROW(engine::check_outputs_apart(
      {{"-o", relative}, {"--stats", "sjd_no_such_folder/c.json"}, {"--heatmap", ""}, {"--tokens", ""}}));
  CHECK_FALSE(std::filesystem::exists("sjd_no_such_folder"));
}

TEST_CASE("an output on an input of the run or on a bundle's file is refused", "[engine][outputs]") {
  sjd::testing::TempDir dir("outputs_apart");
  sjd::testing::write_file(dir / "m" / "model.safetensors", "weights");
  sjd::testing::write_file(dir / "c.json", "{}");
  CHECK_THROWS_WITH(engine::check_outputs_apart({{"--stats", dir / "m" / "." / "model.safetensors"}}, {}, dir / "m"),
                    Catch::Contains("--stats names") && Catch::Contains("a file of the model bundle"));
  CHECK_THROWS_WITH(engine::check_outputs_apart({{"-o", dir / "x.png"}, {"--stats", dir / "c.json"}},
                                                {{"--config", dir / "c.json"}, {"--cost-profile", ""}}),
                    Catch::Contains("the file --config reads"));
  // A new file in the bundle's folder replaces nothing, and a path that only starts like the folder's is outside it.
  sjd::testing::write_file(dir / "m2" / "model.safetensors", "other weights");
  CHECK_NOTHROW(engine::check_outputs_apart(
      {{"--stats", dir / "m" / "new_stats.json"}, {"--tokens", dir / "m2" / "model.safetensors"}},
      {{"--config", dir / "c.json"}}, dir / "m"));
}
