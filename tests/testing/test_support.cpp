#include "testing/test_support.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace sjd::testing {

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("sjd_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {
// The environment's value (CTest sets both, so a suite built elsewhere and moved runs where
// its CTest files now say: scripts/pack_prebuilt.sh), else the folders the build was made in.
std::filesystem::path from_environment(const char* name, const char* built_in) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built_in;
}
}  // namespace

std::filesystem::path source_dir() { return from_environment("SJD_SOURCE_DIR", SJD_SOURCE_DIR); }
std::filesystem::path build_dir() { return from_environment("SJD_BUILD_DIR", SJD_BUILD_DIR); }

std::string python_program() {
  const std::filesystem::path python = from_environment("SJD_PYTHON", SJD_PYTHON);
  std::error_code error;
  return std::filesystem::exists(python, error) ? python.string() : "python3";
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace sjd::testing
