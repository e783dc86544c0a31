// The step profiler's own summary (engine/bench_profile.h), called directly: what `sjd bench
// --profile` prints per step kind.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "engine/bench_profile.h"
#include "testing/test_support.h"

using namespace sjd;

TEST_CASE("a step profile sums the step's operators, and one that collected nothing fails", "[bench]") {
  testing::TempDir dir("bench_profile_unit");
  const at::Device cpu(at::kCPU);
  const engine::StepProfile busy = engine::profile_steps(
      "add", cpu, 2, [](int) { at::ones({64}).add_(1); }, (dir / "add.trace.json").string());
  CHECK(busy.events_per_step > 0);
  CHECK(busy.steps == 2);
  REQUIRE_FALSE(busy.top.empty());
  // The profiler only logs what it could not collect (CUPTI on a GPU): an empty summary must not pass
  // for a step without work.
  CHECK_THROWS_WITH(engine::profile_steps("idle", cpu, 2, [](int) {}, (dir / "idle.trace.json").string()),
                    Catch::Contains("profile: no ATen operators (inclusive) collected"));
}
