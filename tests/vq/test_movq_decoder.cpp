// The MoVQ decoder on random tiny checkpoints in the release's tensor names:
// output geometry, that every loaded tensor shapes the image, and the config
// and checkpoint errors. Numerical parity with transformers' Emu3VQVAE is
// tests/python/test_emu3_parity.py.
#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <map>

#include "vq/movq_decoder.h"
#include "vq_test_weights.h"

using namespace sjd::vq;
using Catch::Matchers::Contains;

namespace {

// Two levels (2x), 64 and 128 channels, attention at level 1, the release's temporal factor 4.
// Two channels per GroupNorm group at least: with one, a per-channel bias
// feeding a norm cancels out, hiding mistakes.
VQConfig tiny_movq_config() {
  VQConfig c;
  c.kind = "movq";
  c.codebook_size = 16;
  c.embed_dim = 4;
  c.z_channels = 4;
  c.ch = 64;
  c.ch_mult = {1, 2};
  c.num_res_blocks = 1;
  c.out_channels = 3;
  c.downsample = 2;
  c.raw = {{"kind", "movq"},       {"codebook_size", 16}, {"embed_dim", 4},        {"z_channels", 4},
           {"ch", 64},             {"ch_mult", {1, 2}},   {"num_res_blocks", 1},   {"attn_resolutions", nlohmann::json::array()},
           {"out_channels", 3},    {"downsample", 2},     {"attn_levels", {1}},    {"temporal_downsample_factor", 4}};
  return c;
}

class Tensors {
 public:
  explicit Tensors(uint64_t seed) : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}
  at::Tensor normal(at::IntArrayRef shape) { return at::normal(0.0, 1.0, shape, generator_); }

  void conv(const std::string& prefix, int64_t in, int64_t out, std::vector<int64_t> kernel) {
    std::vector<int64_t> shape = {out, in};
    int64_t fan_in = in;
    for (int64_t k : kernel) shape.push_back(k), fan_in *= k;
    map[prefix + ".weight"] = normal(shape) / std::sqrt(static_cast<double>(fan_in));
    map[prefix + ".bias"] = normal({out}) * 0.1;
  }
  void batch_norm(const std::string& prefix, int64_t channels) {
    map[prefix + ".weight"] = 1.0 + normal({channels}) * 0.1;
    map[prefix + ".bias"] = normal({channels}) * 0.1;
    map[prefix + ".running_mean"] = normal({channels}) * 0.2;
    map[prefix + ".running_var"] = normal({channels}).abs() + 0.5;
  }
  void spatial_norm(const std::string& prefix, int64_t channels) {
    map[prefix + ".norm_layer.weight"] = 1.0 + normal({channels}) * 0.1;
    map[prefix + ".norm_layer.bias"] = normal({channels}) * 0.1;
    conv(prefix + ".conv_y", 4, channels, {1, 1});
    conv(prefix + ".conv_b", 4, channels, {1, 1});
  }
  void resnet(const std::string& prefix, int64_t in, int64_t out) {
    spatial_norm(prefix + ".norm1", in);
    conv(prefix + ".conv1", in, out, {3, 3});
    spatial_norm(prefix + ".norm2", out);
    conv(prefix + ".conv2", out, out, {3, 3});
    if (in != out) conv(prefix + ".nin_shortcut", in, out, {1, 1});
  }
  void attn(const std::string& prefix, int64_t channels) {
    spatial_norm(prefix + ".norm", channels);
    for (const char* part : {".q", ".k", ".v", ".proj_out"}) conv(prefix + part, channels, channels, {1, 1});
  }

  std::map<std::string, at::Tensor> map;

 private:
  at::Generator generator_;
};

// Every tensor the decoder of tiny_movq_config() reads, in the release's names.
std::map<std::string, at::Tensor> random_movq_tensors(uint64_t seed) {
  Tensors t(seed);
  t.map["quantize.embedding.weight"] = t.normal({16, 4});
  t.conv("post_quant_conv.conv", 4, 4, {3, 1, 1});
  for (const char* block : {"decoder.time_res_stack.0"}) {
    t.batch_norm(std::string(block) + ".norm1", 4);
    t.conv(std::string(block) + ".conv1.conv", 4, 4, {3, 3, 3});
    t.batch_norm(std::string(block) + ".norm2", 4);
    t.conv(std::string(block) + ".conv2.conv", 4, 4, {3, 3, 3});
  }
  t.conv("decoder.time_conv.0.conv.conv", 4, 4, {3, 3, 3});
  t.conv("decoder.time_conv.1.conv.conv", 4, 4, {3, 3, 3});
  t.conv("decoder.conv_in", 4, 128, {3, 3});
  t.resnet("decoder.mid.block_1", 128, 128);
  t.attn("decoder.mid.attn_1", 128);
  t.resnet("decoder.mid.block_2", 128, 128);
  for (int j = 0; j < 2; ++j) {
    t.resnet("decoder.up.1.block." + std::to_string(j), 128, 128);
    t.attn("decoder.up.1.attn." + std::to_string(j), 128);
  }
  t.conv("decoder.up.1.upsample.conv", 128, 128, {3, 3});
  t.resnet("decoder.up.0.block.0", 128, 64);
  t.resnet("decoder.up.0.block.1", 64, 64);
  t.spatial_norm("decoder.norm_out", 64);
  t.conv("decoder.conv_out", 64, 3, {3, 3});
  return t.map;
}

std::string error_of(const VQConfig& config, const std::map<std::string, at::Tensor>& tensors) {
  try {
    make_vq_decoder(config, testing::to_weight_map(tensors, "movq.safetensors"));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

at::Tensor random_codes(int64_t height, int64_t width, uint64_t seed) {
  at::manual_seed(seed);
  return at::randint(16, {height, width}, at::kLong);
}

}  // namespace

TEST_CASE("movq decodes an H x W grid to an H*ds x W*ds RGB image", "[vq][movq]") {
  const auto decoder = make_vq_decoder(tiny_movq_config(), testing::to_weight_map(random_movq_tensors(1), "w"));
  const at::Tensor image = decoder->decode_float(random_codes(3, 5, 2));
  CHECK(image.sizes() == at::IntArrayRef{3, 6, 10});
  const at::Tensor bytes = decoder->decode(random_codes(3, 5, 2));
  CHECK(bytes.sizes() == at::IntArrayRef{6, 10, 3});
  CHECK(bytes.scalar_type() == at::kByte);
  CHECK(image.std().item<float>() > 0.01f);
  CHECK(at::equal(decoder->codebook(), random_movq_tensors(1).at("quantize.embedding.weight")));
}

TEST_CASE("every tensor of the movq checkpoint influences the decoded image", "[vq][movq]") {
  // Catches a block loaded but skipped, or two tensors swapped in use.
  at::set_num_threads(1);
  const auto config = tiny_movq_config();
  const auto tensors = random_movq_tensors(3);
  const at::Tensor codes = random_codes(2, 3, 4);
  const at::Tensor reference = MovqDecoder(config, testing::to_weight_map(tensors, "w")).decode_float(codes);
  at::manual_seed(5);
  for (const auto& [name, tensor] : tensors) {
    // A key bias adds q_i . b to every score of row i: softmax cancels it.
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".k.bias") == 0) continue;
    auto changed = tensors;
    const bool variance = name.size() > 12 && name.compare(name.size() - 12, 12, ".running_var") == 0;
    changed[name] = variance ? tensor * 2.0 : tensor + at::randn_like(tensor) * 0.5;  // variances stay positive
    const at::Tensor output = MovqDecoder(config, testing::to_weight_map(changed, "w")).decode_float(codes);
    INFO("perturbed " << name);
    CHECK((output - reference).abs().max().item<float>() > 1e-4f);
  }
}

TEST_CASE("movq names a missing or mis-shaped tensor", "[vq][movq][errors]") {
  const auto config = tiny_movq_config();
  auto tensors = random_movq_tensors(6);
  SECTION("missing") {
    tensors.erase("decoder.up.1.attn.1.norm.conv_b.weight");
    CHECK_THAT(error_of(config, tensors),
               Contains("decoder.up.1.attn.1.norm.conv_b.weight") && Contains("movq.safetensors"));
  }
  SECTION("batch-norm statistics missing") {
    tensors.erase("decoder.time_res_stack.0.norm2.running_var");
    CHECK_THAT(error_of(config, tensors), Contains("decoder.time_res_stack.0.norm2.running_var"));
  }
  SECTION("mis-shaped") {
    tensors["post_quant_conv.conv.weight"] = at::zeros({4, 4, 1, 1, 1});
    CHECK_THAT(error_of(config, tensors), Contains("post_quant_conv.conv.weight") && Contains("[4, 4, 3, 1, 1]") &&
                                              Contains("[4, 4, 1, 1, 1]"));
  }
}

TEST_CASE("movq config errors name the key", "[vq][movq][errors]") {
  auto config = tiny_movq_config();
  const auto tensors = random_movq_tensors(7);
  SECTION("unknown key") {
    config.raw["attn_level"] = {1};
    CHECK_THAT(error_of(config, tensors), Contains("vq.attn_level: unknown key"));
  }
  SECTION("taming's attn_resolutions") {
    config.attn_resolutions = {4};
    CHECK_THAT(error_of(config, tensors), Contains("vq.attn_resolutions") && Contains("attn_levels"));
  }
  SECTION("resolution") {
    config.raw["resolution"] = 16;
    CHECK_THAT(error_of(config, tensors), Contains("vq.resolution"));
  }
  SECTION("attention level out of range") {
    config.raw["attn_levels"] = {2};
    CHECK_THAT(error_of(config, tensors), Contains("vq.attn_levels[0]") && Contains("0..1"));
  }
  SECTION("attn_levels missing") {
    config.raw.erase("attn_levels");
    CHECK_THAT(error_of(config, tensors), Contains("vq.attn_levels"));
  }
  SECTION("temporal factor") {
    config.raw["temporal_downsample_factor"] = 3;
    CHECK_THAT(error_of(config, tensors), Contains("vq.temporal_downsample_factor") && Contains("power of two"));
  }
  SECTION("z_channels differs from embed_dim") {
    config.z_channels = 8;
    CHECK_THAT(error_of(config, tensors), Contains("vq.z_channels") && Contains("embed_dim"));
  }
}

TEST_CASE("movq rejects codes outside the codebook", "[vq][movq][errors]") {
  const auto decoder = make_vq_decoder(tiny_movq_config(), testing::to_weight_map(random_movq_tensors(8), "w"));
  at::Tensor codes = at::zeros({2, 2}, at::kLong);
  codes[1][0] = 16;
  CHECK_THROWS_WITH(decoder->decode(codes), Contains("code 16 at row 1, column 0") && Contains("[0, 16)"));
}
