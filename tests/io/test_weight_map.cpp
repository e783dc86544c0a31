// WeightMap: loading by file type, merging, lookups with shape checks, and
// sharded checkpoints through their index JSON.
#include "io/safetensors.h"
#include "io/weights.h"
#include "testing/test_support.h"

#include <catch2/catch.hpp>

namespace io = sjd::io;
using Catch::Matchers::Contains;
using sjd::testing::TempDir;

namespace {

// Two shards and their index, as HF writes a sharded checkpoint.
void write_sharded(const TempDir& dir, const std::string& weight_map_json) {
  io::write_safetensors(dir / "model-00001-of-00002.safetensors",
                        {{"embed.weight", at::ones({4, 2})}, {"layer.0.weight", at::full({2, 2}, 2.0)}});
  io::write_safetensors(dir / "model-00002-of-00002.safetensors", {{"head.weight", at::full({4, 2}, 3.0)}});
  sjd::testing::write_file(dir / "model.safetensors.index.json",
                           R"({"metadata": {"total_size": 96}, "weight_map": )" + weight_map_json + "}");
}

const char* kGoodWeightMap = R"({"embed.weight": "model-00001-of-00002.safetensors",
  "layer.0.weight": "model-00001-of-00002.safetensors", "head.weight": "model-00002-of-00002.safetensors"})";

std::string load_error(const std::filesystem::path& file) {
  try {
    io::WeightMap::load(file);
  } catch (const io::WeightError& error) {
    return error.what();
  }
  FAIL("loading " << file << " did not throw WeightError");
  return "";
}

}  // namespace

TEST_CASE("get checks names and shapes and says where a tensor came from", "[io][weights]") {
  TempDir dir("weights_get");
  io::write_safetensors(dir / "a.safetensors", {{"w", at::zeros({3, 4})}, {"b", at::zeros({4})}});
  const io::WeightMap weights = io::WeightMap::load(dir / "a.safetensors");
  const std::string file = (dir / "a.safetensors").string();

  CHECK(weights.size() == 2);
  CHECK(weights.names() == std::vector<std::string>{"b", "w"});
  CHECK(weights.contains("w"));
  CHECK_FALSE(weights.contains("x"));
  CHECK(weights.source_of("w") == file);
  CHECK(weights.get("w", {3, 4}).sizes() == at::IntArrayRef({3, 4}));
  CHECK_THROWS_AS(weights.get("w", {4, 3}), io::WeightError);
  CHECK_THROWS_WITH(weights.get("w", {4, 3}),
                    Contains("tensor 'w'") && Contains("expected shape [4, 3]") && Contains("found [3, 4]") &&
                        Contains(file));
  CHECK_THROWS_WITH(weights.get("b", {4, 1}), Contains("expected shape [4, 1], found [4]"));
  CHECK_THROWS_WITH(weights.get("missing"), Contains("tensor 'missing' not found") && Contains(file));
}

TEST_CASE("load_all merges files and rejects a name found twice", "[io][weights]") {
  TempDir dir("weights_load_all");
  io::write_safetensors(dir / "a.safetensors", {{"x", at::ones({1})}});
  io::write_safetensors(dir / "b.safetensors", {{"y", at::ones({2})}});
  io::write_safetensors(dir / "c.safetensors", {{"x", at::ones({3})}});

  const io::WeightMap merged = io::WeightMap::load_all({dir / "a.safetensors", dir / "b.safetensors"});
  CHECK(merged.names() == std::vector<std::string>{"x", "y"});
  CHECK(merged.source_of("y") == (dir / "b.safetensors").string());
  CHECK_THROWS_WITH(io::WeightMap::load_all({dir / "a.safetensors", dir / "c.safetensors"}),
                    Contains("tensor 'x'") && Contains("a.safetensors") && Contains("c.safetensors"));
}

TEST_CASE("load rejects a file of unknown type", "[io][weights]") {
  TempDir dir("weights_unknown");
  sjd::testing::write_file(dir / "weights.bin", "data");
  CHECK_THAT(load_error(dir / "weights.bin"), Contains("weights.bin") && Contains("unknown weight file type"));
}

TEST_CASE("sharded checkpoint loads through its index", "[io][weights][sharded]") {
  TempDir dir("weights_sharded");
  write_sharded(dir, kGoodWeightMap);
  const io::WeightMap weights = io::WeightMap::load(dir / "model.safetensors.index.json");
  CHECK(weights.names() == std::vector<std::string>{"embed.weight", "head.weight", "layer.0.weight"});
  CHECK(at::equal(weights.get("head.weight"), at::full({4, 2}, 3.0)));
  CHECK(at::equal(weights.get("layer.0.weight"), at::full({2, 2}, 2.0)));
  CHECK(weights.source_of("head.weight") == (dir / "model-00002-of-00002.safetensors").string());
}

TEST_CASE("sharded index errors name the index file and tensor", "[io][weights][sharded]") {
  TempDir dir("weights_sharded_bad");
  const std::string index = (dir / "model.safetensors.index.json").string();

  SECTION("missing shard") {
    write_sharded(dir, R"({"embed.weight": "model-00001-of-00002.safetensors",
                           "extra.weight": "model-00003-of-00003.safetensors"})");
    CHECK_THAT(load_error(index), Contains(index) && Contains("model-00003-of-00003.safetensors") &&
                                      Contains("tensor 'extra.weight'") && Contains("cannot open"));
  }
  SECTION("tensor in another shard than the index says") {
    write_sharded(dir, R"({"embed.weight": "model-00002-of-00002.safetensors",
                           "layer.0.weight": "model-00001-of-00002.safetensors",
                           "head.weight": "model-00002-of-00002.safetensors"})");
    CHECK_THAT(load_error(index), Contains(index) && Contains("tensor 'embed.weight'") &&
                                      Contains("places it in 'model-00002-of-00002.safetensors'") &&
                                      Contains("it is in 'model-00001-of-00002.safetensors'"));
  }
  SECTION("tensor listed but in no shard") {
    write_sharded(dir, R"({"embed.weight": "model-00001-of-00002.safetensors",
                           "ghost.weight": "model-00001-of-00002.safetensors"})");
    CHECK_THAT(load_error(index), Contains(index) && Contains("tensor 'ghost.weight'") &&
                                      Contains("does not contain it"));
  }
  SECTION("index without weight_map") {
    sjd::testing::write_file(index, R"({"metadata": {}})");
    CHECK_THAT(load_error(index), Contains(index) && Contains("weight_map"));
  }
  SECTION("index whose weight_map is empty") {  // it said only that a tensor was "not found in (no weight files)"
    sjd::testing::write_file(index, R"({"weight_map": {}})");
    CHECK_THAT(load_error(index), Contains(index) && Contains("names no tensor"));
  }
  SECTION("index that is not JSON") {
    sjd::testing::write_file(index, "{\"weight_map\": {");
    CHECK_THAT(load_error(index), Contains(index) && Contains("not valid JSON"));
  }
  SECTION("shard name that is not a string") {
    sjd::testing::write_file(index, R"({"weight_map": {"w": 3}})");
    CHECK_THAT(load_error(index), Contains(index) && Contains("tensor 'w'"));
  }
  SECTION("malformed shard") {
    write_sharded(dir, kGoodWeightMap);
    sjd::testing::write_file(dir / "model-00002-of-00002.safetensors", "tiny");
    CHECK_THAT(load_error(index), Contains(index) && Contains("model-00002-of-00002.safetensors") &&
                                      Contains("shorter than the 8-byte header length"));
  }
}
