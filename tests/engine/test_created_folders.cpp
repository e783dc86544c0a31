// What a failed run leaves behind: the output folders it made and left empty are removed
// (app/cli_common.cpp's run_guarded), but not one another process has meanwhile taken as its own.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "engine/created_folders.h"
#include "engine/outputs.h"
#include "testing/test_support.h"

using namespace sjd;
using sjd::testing::TempDir;

TEST_CASE("a failed run's empty folders are removed, unless another process has taken one as its own",
          "[engine][outputs]") {
  TempDir dir("created_folders");
  engine::prepare_output_dir(dir / "a" / "b");
  engine::prepare_output_dir(dir / "c");
  // Another process's prepare_output_dir probes the folder it will write into: a file made and removed.
  { std::ofstream(dir / "c" / ".probe") << "x"; }
  std::filesystem::remove(dir / "c" / ".probe");
  engine::remove_empty_created_folders();
  CHECK_FALSE(std::filesystem::exists(dir / "a"));
  CHECK(std::filesystem::is_directory(dir / "c"));
}

TEST_CASE("a folder the output's path passes through is removed too, though the folder it names exists",
          "[engine][outputs]") {
  TempDir dir("created_through");
  // `-o ghost/../x.png`: making the output's folder made ghost/, and a failed run left it behind.
  engine::prepare_output_dir(dir / "ghost" / "..");
  engine::prepare_output_dir(dir / "a" / "b" / ".." / "c");
  CHECK(std::filesystem::is_directory(dir / "ghost"));
  CHECK(std::filesystem::is_directory(dir / "a" / "b"));
  engine::remove_empty_created_folders();
  CHECK(std::filesystem::is_directory(dir.path()));
  CHECK_FALSE(std::filesystem::exists(dir / "ghost"));
  CHECK_FALSE(std::filesystem::exists(dir / "a"));
}
