// LlamaGen's VQ-16 decoder on random checkpoints in its key layout
// (decoder.mid.{0,1,2}, decoder.conv_blocks.{i}.res/attn/upsample), written
// here from the layout in vq16_decoder.h. Pixel parity with an independent
// PyTorch decoder is in tests/python/test_llamagen_parity.py.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>

#include "io/weights.h"
#include "vq/vq_decoder.h"

namespace {

// ch 64, ch_mult [1, 2]: conv_blocks.0 at 128 channels (2 res + 2 attn blocks,
// then upsample), conv_blocks.1 at 64 channels; 2 pixels per code. Two or more
// channels per GroupNorm group, so a per-channel change before a norm shows.
nlohmann::json tiny_vq_json() {
  return {{"kind", "vq16"},      {"codebook_size", 10},   {"embed_dim", 4},
          {"z_channels", 32},    {"ch", 64},              {"ch_mult", {1, 2}},
          {"num_res_blocks", 1}, {"attn_resolutions", nlohmann::json::array()},
          {"out_channels", 3},   {"downsample", 2},       {"codebook_l2_norm", true}};
}

sjd::vq::VQConfig config_of(const nlohmann::json& j) { return sjd::vq::parse_vq_config(j, "bundle.json: vq"); }

class Maker {
 public:
  explicit Maker(uint64_t seed) : gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}
  at::Tensor normal(at::IntArrayRef shape, double scale) { return at::normal(0.0, scale, shape, gen_); }
  void conv(const std::string& p, int64_t in, int64_t out, int64_t k) {
    t[p + ".weight"] = normal({out, in, k, k}, 1.0 / std::sqrt(static_cast<double>(in * k * k)));
    t[p + ".bias"] = normal({out}, 0.1);
  }
  void norm(const std::string& p, int64_t c) {
    t[p + ".weight"] = 1.0 + normal({c}, 0.1);
    t[p + ".bias"] = normal({c}, 0.1);
  }
  void res(const std::string& p, int64_t in, int64_t out) {
    norm(p + ".norm1", in);
    conv(p + ".conv1", in, out, 3);
    norm(p + ".norm2", out);
    conv(p + ".conv2", out, out, 3);
    if (in != out) conv(p + ".nin_shortcut", in, out, 1);
  }
  void attn(const std::string& p, int64_t c) {
    norm(p + ".norm", c);
    for (const char* part : {".q", ".k", ".v", ".proj_out"}) conv(p + part, c, c, 1);
  }
  std::map<std::string, at::Tensor> t;

 private:
  at::Generator gen_;
};

std::map<std::string, at::Tensor> random_vq16(uint64_t seed) {
  Maker m(seed);
  m.t["quantize.embedding.weight"] = m.normal({10, 4}, 1.0);
  m.conv("post_quant_conv", 4, 32, 1);
  m.conv("decoder.conv_in", 32, 128, 3);
  m.res("decoder.mid.0", 128, 128);
  m.attn("decoder.mid.1", 128);
  m.res("decoder.mid.2", 128, 128);
  m.res("decoder.conv_blocks.0.res.0", 128, 128);
  m.attn("decoder.conv_blocks.0.attn.0", 128);
  m.res("decoder.conv_blocks.0.res.1", 128, 128);
  m.attn("decoder.conv_blocks.0.attn.1", 128);
  m.conv("decoder.conv_blocks.0.upsample.conv", 128, 128, 3);
  m.res("decoder.conv_blocks.1.res.0", 128, 64);
  m.res("decoder.conv_blocks.1.res.1", 64, 64);
  m.norm("decoder.norm_out", 64);
  m.conv("decoder.conv_out", 64, 3, 3);
  // Encoder-side tensors of the release file: present, never read.
  m.t["quant_conv.weight"] = m.normal({4, 32, 1, 1}, 1.0);
  m.t["quantize.codebook_used"] = at::zeros({65536});
  return m.t;
}

sjd::io::WeightMap weight_map(const std::map<std::string, at::Tensor>& tensors) {
  sjd::io::WeightMap w;
  for (const auto& [name, tensor] : tensors) w.insert(name, tensor, "vq16-test.safetensors");
  return w;
}

const at::Tensor kCodes = at::tensor(std::vector<int64_t>{0, 3, 9, 4, 4, 1}).view({3, 2});

}  // namespace

TEST_CASE("vq16 decodes an H x W grid to [3, 2H, 2W] and RGB bytes", "[vq][vq16]") {
  const auto decoder = sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(random_vq16(1)));
  const at::Tensor image = decoder->decode_float(kCodes);
  REQUIRE(image.sizes() == at::IntArrayRef({3, 6, 4}));
  CHECK(at::isfinite(image).all().item<bool>());
  const at::Tensor rgb = decoder->decode(kCodes);
  CHECK(rgb.sizes() == at::IntArrayRef({6, 4, 3}));
  CHECK(rgb.scalar_type() == at::kByte);
}

TEST_CASE("vq16 normalises codebook rows: row scale does not matter, direction does", "[vq][vq16]") {
  auto tensors = random_vq16(2);
  const at::Tensor raw = tensors.at("quantize.embedding.weight").clone();
  const auto decoder = sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(tensors));
  const at::Tensor norms = decoder->codebook().norm(2, -1);
  CHECK(at::allclose(norms, at::ones_like(norms), 1e-6, 1e-6));
  CHECK(at::allclose(decoder->codebook() * raw.norm(2, -1, true), raw, 1e-5, 1e-6));

  tensors["quantize.embedding.weight"] = raw * at::linspace(0.2, 7.0, 10).unsqueeze(1);
  const auto rescaled = sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(tensors));
  CHECK(at::allclose(rescaled->decode_float(kCodes), decoder->decode_float(kCodes), 1e-4, 1e-5));

  nlohmann::json plain = tiny_vq_json();
  plain["codebook_l2_norm"] = false;
  const auto unnormalised = sjd::vq::make_vq_decoder(config_of(plain), weight_map(tensors));
  CHECK_FALSE(at::allclose(unnormalised->decode_float(kCodes), decoder->decode_float(kCodes), 1e-3, 1e-3));
}

TEST_CASE("every vq16 decoder tensor influences the image", "[vq][vq16]") {
  const auto tensors = random_vq16(3);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(33);
  const at::Tensor base =
      sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(tensors))->decode_float(kCodes);
  for (const auto& [name, tensor] : tensors) {
    if (name == "quant_conv.weight" || name == "quantize.codebook_used") continue;
    // An attention key bias adds q.b to every score of a query: softmax ignores it.
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".k.bias") == 0) continue;
    auto changed = tensors;
    changed[name] = tensor + at::normal(0.0, 0.5, tensor.sizes(), gen);  // per element: a uniform shift may cancel
    const at::Tensor image =
        sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(changed))->decode_float(kCodes);
    INFO(name);
    CHECK_FALSE(at::allclose(image, base, 1e-6, 1e-6));
  }
}

TEST_CASE("vq16 errors name the tensor, the key or the code", "[vq][vq16][errors]") {
  auto tensors = random_vq16(4);
  SECTION("missing attention tensor of conv_blocks.0") {
    tensors.erase("decoder.conv_blocks.0.attn.1.proj_out.bias");
    CHECK_THROWS_WITH(sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(tensors)),
                      Catch::Contains("decoder.conv_blocks.0.attn.1.proj_out.bias") &&
                          Catch::Contains("vq16-test.safetensors"));
  }
  SECTION("mis-shaped codebook") {
    tensors["quantize.embedding.weight"] = at::zeros({10, 8});
    CHECK_THROWS_WITH(sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(tensors)),
                      Catch::Contains("quantize.embedding.weight") && Catch::Contains("[10, 4]") &&
                          Catch::Contains("[10, 8]"));
  }
  SECTION("bundle keys") {
    nlohmann::json j = tiny_vq_json();
    j["codebook_l2_norm"] = "yes";
    CHECK_THROWS_WITH(sjd::vq::make_vq_decoder(config_of(j), weight_map(tensors)),
                      Catch::Contains("vq.codebook_l2_norm"));
    j = tiny_vq_json();
    j["l2_norm"] = true;
    CHECK_THROWS_WITH(sjd::vq::make_vq_decoder(config_of(j), weight_map(tensors)), Catch::Contains("vq.l2_norm"));
    j = tiny_vq_json();
    j["attn_resolutions"] = {8};
    j["resolution"] = 16;
    CHECK_THROWS_WITH(sjd::vq::make_vq_decoder(config_of(j), weight_map(tensors)),
                      Catch::Contains("vq.attn_resolutions"));
  }
  SECTION("codes") {
    const auto decoder = sjd::vq::make_vq_decoder(config_of(tiny_vq_json()), weight_map(tensors));
    CHECK_THROWS_WITH(decoder->decode_float(at::tensor(std::vector<int64_t>{0, 10}).view({1, 2})),
                      Catch::Contains("code 10 at row 0, column 1"));
    CHECK_THROWS_AS(decoder->decode_float(at::zeros({2, 2}, at::kFloat)), std::invalid_argument);
  }
}
