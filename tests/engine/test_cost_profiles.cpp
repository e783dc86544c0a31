// Which step-cost profile a generation plans from: the bundle's entry for the device
// and dtype, else the generic one of the device's kind.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "engine/cost_profiles.h"

using namespace sjd;

TEST_CASE("step-cost profile: the bundle's for the device and dtype, else the generic one of that kind",
          "[engine][step_cost]") {
  engine::Bundle bundle;
  bundle.json_path = "bundle.json";
  const decoding::StepCostProfile measured("measured on this GPU", 2, {{1, 1.0}, {2, 1.5}});
  bundle.raw = {{"step_cost", {{"cuda-bf16", measured.to_json()}}}};
  engine::GenerationSettings settings;
  settings.device = "cuda:1";  // every GPU index shares the kind's profile
  settings.dtype = "bf16";
  CHECK(engine::resolve_cost_profile(bundle, settings).name() == "measured on this GPU");
  settings.dtype = "f32";
  CHECK(engine::resolve_cost_profile(bundle, settings).name() == decoding::StepCostProfile::generic_gpu().name());
  settings.device = "cpu";
  CHECK(engine::resolve_cost_profile(bundle, settings).name() == decoding::StepCostProfile::generic().name());
}

TEST_CASE("a bundle's profiles are listed by key, and a malformed one is named", "[engine][step_cost]") {
  engine::Bundle bundle;
  bundle.json_path = "models/x/bundle.json";
  const decoding::StepCostProfile cpu("measured here", 2, {{1, 1.0}, {4, 2.0}});
  const decoding::StepCostProfile gpu("measured on a GPU", 2, {{1, 5.0}, {64, 6.0}});
  bundle.raw = {{"step_cost", {{"cpu-f32", cpu.to_json()}, {"cuda-bf16", gpu.to_json()}}}};
  const auto profiles = engine::bundle_cost_profiles(bundle);
  REQUIRE(profiles.size() == 2);
  CHECK(profiles[0].first == "cpu-f32");
  CHECK(profiles[0].second.name() == "measured here");
  CHECK(profiles[1].first == "cuda-bf16");
  CHECK(profiles[1].second.curves().front().points.back().first == 64);

  bundle.raw.erase("step_cost");
  CHECK(engine::bundle_cost_profiles(bundle).empty());

  // A GPU profile whose points fall is refused even where a CPU run would not read it.
  bundle.raw = {{"step_cost", {{"cpu-f32", cpu.to_json()}, {"cuda-bf16", {{"name", "bad"}, {"rows", 2},
                                                                          {"points", {{4, 1.0}, {1, 2.0}}}}}}}};
  CHECK_THROWS_WITH(engine::bundle_cost_profiles(bundle),
                    Catch::Contains("models/x/bundle.json: /step_cost/cuda-bf16"));
  bundle.raw = {{"step_cost", {1, 2}}};
  CHECK_THROWS_AS(engine::bundle_cost_profiles(bundle), engine::InputError);
}
