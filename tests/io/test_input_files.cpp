// Files sjd reads or writes that are not what they seem: FIFOs, folders, symlink
// loops, names that climb out of a bundle, a disk that fills up mid-line, and
// the temporaries a killed writer leaves behind.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/input_files.h"
#include "testing/test_support.h"

using namespace sjd;
using Catch::Contains;
using sjd::testing::read_file;
using sjd::testing::TempDir;
using sjd::testing::dead_pid;
using sjd::testing::write_file;

TEST_CASE("require_regular_file names what the path is instead", "[io][robustness]") {
  TempDir dir("regular_file");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  std::filesystem::create_directories(dir / "folder");
  std::filesystem::create_symlink(dir / "b", dir / "a");
  std::filesystem::create_symlink(dir / "a", dir / "b");
  write_file(dir / "file", "x");
  const std::vector<std::pair<std::filesystem::path, std::string>> cases = {
      {dir / "fifo", "is a FIFO"},
      {dir / "folder", "is a directory"},
      {dir / "a", "loop of symbolic links"},
      {dir / "missing", "not found"},
      {"/dev/null", "is a device"},
  };
  for (const auto& [path, reason] : cases) {
    INFO(path);
    CHECK_THROWS_WITH(io::require_regular_file(path, "weights"), Contains(path.string()) && Contains(reason));
  }
  CHECK_NOTHROW(io::require_regular_file(dir / "file", "weights"));
}

TEST_CASE("confined_path keeps names a bundle gives inside its folder", "[io][robustness]") {
  const std::filesystem::path dir = "/models/m";
  for (const std::string bad : {"/etc/passwd", "../other/model.safetensors", "sub/../../x", "", ".."}) {
    INFO(bad);
    CHECK_THROWS_AS(io::confined_path(dir, bad, "bundle.json: transformer.weights"), io::FileError);
  }
  CHECK(io::confined_path(dir, "shards/model-00001.safetensors", "k") == dir / "shards/model-00001.safetensors");
  CHECK(io::confined_path(dir, "a..b.safetensors", "k") == dir / "a..b.safetensors");
}

TEST_CASE("outputs may replace regular files only", "[io][robustness]") {
  TempDir dir("outputs");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  write_file(dir / "target", "old");
  std::filesystem::create_symlink(dir / "target", dir / "link");
  CHECK_THROWS_WITH(io::write_file_atomic(dir / "fifo", "new"), Contains("FIFO"));
  CHECK_THROWS_WITH(io::write_file_atomic(dir / "link", "new"), Contains("symbolic link"));
  CHECK_THROWS_WITH(io::write_file_atomic(dir / "no" / "such" / "x", "new"), Contains("does not exist"));
  // Names the file system cannot hold fail before the work, not at the rename after it.
  CHECK_THROWS_WITH(io::check_output_path(dir / (std::string(300, 'n') + ".png")),
                    Contains("the output's name is 304 bytes, more than the 255 a file name can have"));
  CHECK_THROWS_WITH(io::check_output_path(dir / "target" / "x.png"),
                    Contains("cannot write the output there: Not a directory"));
  CHECK(read_file(dir / "target") == "old");
  CHECK(std::filesystem::is_symlink(dir / "link"));
  io::write_file_atomic(dir / "target", "new");
  CHECK(read_file(dir / "target") == "new");
}

TEST_CASE("a full disk during append_line leaves no partial line and is a StorageError", "[io][robustness]") {
  TempDir dir("append_full");
  const auto file = dir / "manifest.jsonl";
  io::append_line(file, "{\"index\":0}");
  const std::string before = read_file(file);
  // RLIMIT_FSIZE makes writes past the limit fail with EFBIG, as a full disk fails with ENOSPC.
  ::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ::getrlimit(RLIMIT_FSIZE, &saved);
  rlimit small = saved;
  small.rlim_cur = before.size() + 5;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool storage_error = false;
  try {
    io::append_line(file, "{\"index\":1,\"prompt\":\"a line longer than what is left\"}");
  } catch (const io::StorageError&) {
    storage_error = true;
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  CHECK(storage_error);
  CHECK(read_file(file) == before);  // rolled back: the next record starts on a line of its own
  io::append_line(file, "{\"index\":2}");
  CHECK(read_file(file) == before + "{\"index\":2}\n");
}

TEST_CASE("temporaries of a dead writer are removed, those of a live one kept", "[io][robustness]") {
  TempDir dir("stale_temporaries");
  const std::string home = "@" + io::temporary_file_home();
  const std::string dead = ".00000_a.png.tmp." + std::to_string(dead_pid()) + ".0" + home;
  const std::string live = ".00001_b.png.tmp." + std::to_string(::getpid()) + ".3" + home;
  const std::string old_style = ".00003_d.png.tmp." + std::to_string(dead_pid()) + ".1";  // before homes were named
  // The same pid on another machine, or in another container of this one, may be alive: not ours to judge.
  const std::string elsewhere = ".00004_e.png.tmp." + std::to_string(dead_pid()) + ".0@other-host~4026531836";
  for (const std::string& name : {dead, live, old_style, elsewhere}) write_file(dir / name, "being written");
  write_file(dir / "00002_c.png", "an image");
  CHECK(io::remove_stale_temporaries(dir.path()) == 2);
  CHECK_FALSE(std::filesystem::exists(dir / dead));
  CHECK_FALSE(std::filesystem::exists(dir / old_style));
  CHECK(std::filesystem::exists(dir / live));
  CHECK(std::filesystem::exists(dir / elsewhere));
  CHECK(std::filesystem::exists(dir / "00002_c.png"));
  // A writer's temporary carries its home.
  {
    io::AtomicFileWriter writer(dir / "f.png");
    bool found = false;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      found = found || (name.rfind(".f.png.tmp.", 0) == 0 && name.size() > home.size() &&
                        name.compare(name.size() - home.size(), home.size(), home) == 0);
    }
    CHECK(found);
  }
  // A target whose name is near the 255-byte limit still gets a temporary.
  const std::string long_name = std::string(240, 'b') + ".png";
  io::write_file_atomic(dir / long_name, "an image");
  CHECK(std::filesystem::exists(dir / long_name));
}
