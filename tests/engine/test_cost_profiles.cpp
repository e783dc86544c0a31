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
