// An image's identity in batch and compare folders (engine/batch_manifest.h):
// what counts as the same run, and how a difference is named -- for manifest
// lines and for claims, including those written before identities recorded
// what automatic windows read from the bundle.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "engine/batch_manifest.h"

using namespace sjd::engine;

namespace {

const nlohmann::json kPlanning = {{"step_cost", "profile (crc32 0badcafe)"}, {"window_prior", {0.6, 0.8, 0.7}}};
const ModelIdentity kModel{"sjd-default-scenes", "sampled-fnv1a64:00000000000000aa"};

nlohmann::json identity(double cfg, const nlohmann::json& planning = kPlanning, const ModelIdentity& model = kModel) {
  return image_identity("a red square", model, {{"cfg", cfg}}, planning);
}

}  // namespace

TEST_CASE("image identity: planning inputs are part of it, and one written without them matches any",
          "[engine][batch]") {
  CHECK(same_identity(identity(1.5), identity(1.5)));
  // A recorded setting that the expected identity leaves out (the device, a setting its method ignores:
  // engine::identity_settings) is not compared; one the expected identity holds and the recorded lacks is.
  const nlohmann::json with_more = image_identity("a red square", kModel,
                                                  {{"cfg", 1.5}, {"device", "cuda"}, {"window", 4}}, kPlanning);
  CHECK(same_identity(with_more, identity(1.5)));
  CHECK(!same_identity(identity(1.5), with_more));
  CHECK(identity_difference(identity(1.5), with_more) == "device unset (now \"cuda\")");
  CHECK(!identity(1.5, nullptr).contains("planning"));           // fixed windows: nothing read from the bundle
  // Written by an sjd that did not record planning inputs (a manifest line or a live claim): taken to match.
  CHECK(same_identity(identity(1.5, nullptr), identity(1.5)));
  CHECK(!same_identity(identity(2.0, nullptr), identity(1.5)));
  // Recorded ones must be equal.
  nlohmann::json other = kPlanning;
  other["window_prior"] = {0.5, 0.7, 0.7};
  CHECK(!same_identity(identity(1.5, other), identity(1.5)));
}

TEST_CASE("image identity: the first difference is named, a settings one before a planning one", "[engine][batch]") {
  nlohmann::json other = kPlanning;
  other["window_prior"] = "generic";
  CHECK(identity_difference(identity(2.0), identity(1.5)) == "cfg 2.0 (now 1.5)");
  CHECK(identity_difference(identity(2.0, other), identity(1.5)) == "cfg 2.0 (now 1.5)");
  CHECK(identity_difference(identity(1.5, other), identity(1.5)) ==
        "automatic windows planned from window_prior \"generic\" (now [0.6,0.8,0.7])");
  CHECK(identity_difference(image_identity("a blue ring", kModel, {{"cfg", 1.5}}, kPlanning),
                            identity(1.5)) == "prompt \"a blue ring\" (now \"a red square\")");
  // A claim file may hold anything: named, never a crash.
  CHECK(identity_difference(nlohmann::json("garbage"), identity(1.5)) == "an identity that is not a JSON object");
  nlohmann::json odd = identity(1.5);
  odd["planning"] = 7;
  CHECK_THAT(identity_difference(odd, identity(1.5)), Catch::Contains("automatic windows planned from 7"));
}

TEST_CASE("image identity: a line written before negative_prompt existed was made without one", "[engine][batch]") {
  const auto with_negative = [](const std::string& text) {
    return image_identity("a red square", kModel, {{"cfg", 1.5}, {"negative_prompt", text}}, kPlanning);
  };
  CHECK(same_identity(identity(1.5), with_negative("")));
  CHECK(!same_identity(identity(1.5), with_negative("a blue ring")));
  CHECK(identity_difference(identity(1.5), with_negative("a blue ring")) ==
        "negative_prompt \"\" (now \"a blue ring\")");
  CHECK(!same_identity(with_negative("a blue ring"), with_negative("")));
}

TEST_CASE("image identity: the weights' fingerprint is part of it, and a line written without one matches any",
          "[engine][batch]") {
  const ModelIdentity retrained{"sjd-default-scenes", "sampled-fnv1a64:00000000000000bb"};
  CHECK(!same_identity(identity(1.5, kPlanning, retrained), identity(1.5)));
  CHECK(identity_difference(identity(1.5, kPlanning, retrained), identity(1.5)) ==
        "weights \"sampled-fnv1a64:00000000000000bb\" (now \"sampled-fnv1a64:00000000000000aa\")");
  // Written by an sjd that did not record the fingerprint: taken to be of the expected weights.
  const nlohmann::json unfingerprinted = identity(1.5, kPlanning, {"sjd-default-scenes", ""});
  CHECK(!unfingerprinted.contains("weights"));
  CHECK(same_identity(unfingerprinted, identity(1.5)));
  // Another bundle name is another model, whatever the weights.
  CHECK(!same_identity(identity(1.5, kPlanning, {"other-bundle", kModel.weights}), identity(1.5)));
}
