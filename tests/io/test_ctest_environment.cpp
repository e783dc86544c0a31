// The environment CTest gives every test (cmake/SjdLibraries.cmake). It once arrived only in
// part: a list passed through catch_discover_tests was split, so the tests and the sjd
// processes they start ran two OpenMP threads each and, two tests at a time on two cores,
// ran 10-30 times slower than they should.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "testing/test_support.h"

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "(unset)" : value;
}

}  // namespace

TEST_CASE("ctest: every test runs with one OpenMP thread and the oneDNN ISA cap", "[io][environment]") {
  // Run outside CTest (the test program by hand), the variables are the caller's business.
  if (std::getenv("SJD_BUILD_DIR") == nullptr) {
    SJD_SKIP_TEST("not run by CTest: nothing to check");
  }
  CHECK(env("OMP_NUM_THREADS") == "1");
  CHECK(env("ONEDNN_MAX_CPU_ISA") == "AVX512_CORE_BF16");
  CHECK(env("SJD_SOURCE_DIR") != "(unset)");
}

TEST_CASE("ctest: the test programs find the trees CTest names, before the folders they were built in",
          "[io][environment]") {
  // A suite built on one machine runs on another (scripts/pack_prebuilt.sh, device_check.sh's suite stage)
  // with its CTest files pointing elsewhere: the programs must follow the environment.
  const std::string saved_source = env("SJD_SOURCE_DIR"), saved_build = env("SJD_BUILD_DIR");
  ::setenv("SJD_SOURCE_DIR", "/moved/source", 1);
  ::setenv("SJD_BUILD_DIR", "/moved/build", 1);
  const std::filesystem::path source = sjd::testing::source_dir(), build = sjd::testing::build_dir();
  ::unsetenv("SJD_SOURCE_DIR");
  ::unsetenv("SJD_BUILD_DIR");
  const std::filesystem::path built_source = sjd::testing::source_dir();
  for (const auto& [name, value] : {std::pair{"SJD_SOURCE_DIR", saved_source}, std::pair{"SJD_BUILD_DIR", saved_build}}) {
    if (value != "(unset)") ::setenv(name, value.c_str(), 1);
  }
  CHECK(source == "/moved/source");
  CHECK(build == "/moved/build");
  CHECK(built_source == SJD_SOURCE_DIR);  // unset: where the build was made
}
