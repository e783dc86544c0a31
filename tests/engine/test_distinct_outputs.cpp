// Two of generate's outputs on one path are refused however the path is written: relative,
// with "./", or absolute, before any of it exists.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine/bundle.h"
#include "engine/outputs.h"

using namespace sjd;

TEST_CASE("outputs naming one file are refused however the path is written", "[engine][outputs]") {
  // Nothing here exists, so nothing is written or resolved through a link.
  const std::filesystem::path relative = "sjd_no_such_folder/c.png";
  const std::filesystem::path absolute = std::filesystem::current_path() / relative;
  CHECK_THROWS_WITH(engine::check_distinct_outputs({{"-o", relative}, {"--stats", "./" + relative.string()}}),
                    Catch::Contains("-o and --stats name the same file"));
  CHECK_THROWS_WITH(engine::check_distinct_outputs({{"-o", relative}, {"--heatmap", absolute}}),
                    Catch::Contains("-o and --heatmap name the same file"));
  CHECK_THROWS_WITH(
      engine::check_distinct_outputs({{"-o", relative}, {"--tokens", "sjd_no_such_folder/../sjd_no_such_folder/c.png"}}),
      Catch::Contains("-o and --tokens"));
  CHECK_NOTHROW(engine::check_distinct_outputs(
      {{"-o", relative}, {"--stats", "sjd_no_such_folder/c.json"}, {"--heatmap", ""}, {"--tokens", ""}}));
  CHECK_FALSE(std::filesystem::exists("sjd_no_such_folder"));
}
