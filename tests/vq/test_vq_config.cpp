// parse_vq_config: the schema example parses field by field, and every kind of
// mistake is reported with the key's path.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "vq/vq_decoder.h"

using sjd::vq::parse_vq_config;
using Catch::Matchers::Contains;

namespace {

// The `vq` object of docs/bundles.md's schema example.
nlohmann::json schema_example() {
  return nlohmann::json::parse(R"({
    "kind": "chameleon-vqgan", "weights": ["vqgan.safetensors"], "codebook_size": 256, "embed_dim": 16,
    "z_channels": 16, "ch": 32, "ch_mult": [1, 1, 2, 2], "num_res_blocks": 1, "attn_resolutions": [],
    "out_channels": 3, "downsample": 8 })");
}

std::string error_of(const nlohmann::json& j) {
  try {
    parse_vq_config(j, "bundle.json: vq");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("parse_vq_config reads the schema example", "[vq][config]") {
  const auto c = parse_vq_config(schema_example(), "bundle.json: vq");
  CHECK(c.kind == "chameleon-vqgan");
  CHECK(c.codebook_size == 256);
  CHECK(c.embed_dim == 16);
  CHECK(c.z_channels == 16);
  CHECK(c.ch == 32);
  CHECK(c.ch_mult == std::vector<int64_t>{1, 1, 2, 2});
  CHECK(c.num_res_blocks == 1);
  CHECK(c.attn_resolutions.empty());
  CHECK(c.out_channels == 3);
  CHECK(c.downsample == 8);
  CHECK(c.resolution == 0);
}

TEST_CASE("parse_vq_config reads attention placement", "[vq][config]") {
  auto j = schema_example();
  j["resolution"] = 128;
  j["attn_resolutions"] = {32, 16};
  const auto c = parse_vq_config(j, "bundle.json: vq");
  CHECK(c.resolution == 128);
  CHECK(c.attn_resolutions == std::vector<int64_t>{32, 16});
}

TEST_CASE("parse_vq_config errors name the key", "[vq][config]") {
  SECTION("missing key") {
    auto j = schema_example();
    j.erase("z_channels");
    CHECK_THAT(error_of(j), Contains("bundle.json: vq.z_channels") && Contains("missing"));
  }
  SECTION("wrong type") {
    auto j = schema_example();
    j["ch"] = "32";
    CHECK_THAT(error_of(j), Contains("vq.ch:") && Contains("positive integer"));
  }
  SECTION("a kind that is no string") {  // was the JSON library's "type must be string", naming no key
    auto j = schema_example();
    j["kind"] = 5;
    CHECK_THAT(error_of(j), Contains("vq.kind"));
  }
  SECTION("non-positive") {
    auto j = schema_example();
    j["codebook_size"] = 0;
    CHECK_THAT(error_of(j), Contains("vq.codebook_size"));
  }
  SECTION("bad array element") {
    auto j = schema_example();
    j["ch_mult"] = {1, -1, 2, 2};
    CHECK_THAT(error_of(j), Contains("vq.ch_mult[1]"));
  }
  SECTION("empty ch_mult") {
    auto j = schema_example();
    j["ch_mult"] = nlohmann::json::array();
    CHECK_THAT(error_of(j), Contains("vq.ch_mult") && Contains("empty"));
  }
  SECTION("more levels than any decoder has") {  // 65 levels would shift 1 past 63 bits
    auto j = schema_example();
    j["ch_mult"] = std::vector<int64_t>(65, 1);
    j["downsample"] = 1;
    CHECK_THAT(error_of(j), Contains("vq.ch_mult") && Contains("65 levels (at most 16)"));
  }
  SECTION("unknown key") {
    auto j = schema_example();
    j["chmult"] = {1, 2};
    CHECK_THAT(error_of(j), Contains("vq.chmult") && Contains("unknown"));
  }
  SECTION("downsample inconsistent with ch_mult") {
    auto j = schema_example();
    j["downsample"] = 16;
    CHECK_THAT(error_of(j), Contains("vq.downsample") && Contains("8"));
  }
  SECTION("attention without resolution") {
    auto j = schema_example();
    j["attn_resolutions"] = {16};
    CHECK_THAT(error_of(j), Contains("vq.resolution") && Contains("missing"));
  }
  SECTION("attention at a side no level has") {
    auto j = schema_example();
    j["resolution"] = 128;
    j["attn_resolutions"] = {16, 24};
    CHECK_THAT(error_of(j), Contains("vq.attn_resolutions[1]") && Contains("128, 64, 32, 16"));
  }
  SECTION("not an object") {
    CHECK_THAT(error_of(nlohmann::json::array()), Contains("bundle.json: vq") && Contains("object"));
  }
}

TEST_CASE("make_vq_decoder rejects an unknown kind", "[vq][config]") {
  auto c = parse_vq_config(schema_example(), "bundle.json: vq");
  c.kind = "no-such-vq";
  CHECK_THROWS_WITH(sjd::vq::make_vq_decoder(c, sjd::io::WeightMap{}), Contains("vq.kind") && Contains("no-such-vq"));
}
