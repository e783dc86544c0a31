#pragma once
// Helpers shared by the Catch2 test programs.
#include <filesystem>
#include <string>

namespace sjd::testing {

// A fresh, empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The source and build trees: $SJD_SOURCE_DIR / $SJD_BUILD_DIR when set, else where the tests were built.
std::filesystem::path source_dir();
std::filesystem::path build_dir();
// The Python the build was configured with (setup.sh's PYTHON: a venv's, with torch), or SJD_PYTHON; where
// neither exists (a suite carried to another machine), python3 on the PATH.
std::string python_program();

// Writes bytes to a file (creating parent folders).
void write_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_file(const std::filesystem::path& path);

// The id of a process that has exited (and been reaped), so it is not running.
int dead_pid();

}  // namespace sjd::testing

// Ends a test case that cannot run on this machine (a shared data file or Python package is absent).
// CTest reports it as skipped, never as passed: its output matches the SKIP_REGULAR_EXPRESSION that
// cmake/SjdLibraries.cmake gives every Catch2 case. Only at the start of a case: CTest ignores the
// exit code of a case whose output says it skipped.
#define SJD_SKIP_TEST(reason)               \
  do {                                      \
    WARN("sjd-test-skipped: " << reason);   \
    return;                                 \
  } while (false)
