// The environment CTest gives every test (cmake/SjdLibraries.cmake). It once arrived only in
// part: a list passed through catch_discover_tests was split, so the tests and the sjd
// processes they start ran two OpenMP threads each and, two tests at a time on two cores,
// ran 10-30 times slower than they should.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "(unset)" : value;
}

}  // namespace

TEST_CASE("ctest: every test runs with one OpenMP thread and the oneDNN ISA cap", "[io][environment]") {
  // Run outside CTest (the test program by hand), the variables are the caller's business.
  if (std::getenv("SJD_BUILD_DIR") == nullptr) {
    WARN("not run by CTest: nothing to check");
    return;
  }
  CHECK(env("OMP_NUM_THREADS") == "1");
  CHECK(env("ONEDNN_MAX_CPU_ISA") == "AVX512_CORE_BF16");
  CHECK(env("SJD_SOURCE_DIR") != "(unset)");
}
