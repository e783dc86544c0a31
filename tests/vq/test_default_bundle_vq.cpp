// The default model's trained VQ decoder (models/default, written by
// scripts/build_default_model.sh) loads from its bundle.json and draws
// colourful images rather than flat grey ones.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "testing/test_support.h"
#include "vq/vq_decoder.h"

using namespace sjd;

TEST_CASE("the default bundle's VQ decoder turns its code grid into a colourful image of its resolution",
          "[vq][default]") {
  const auto bundle_dir = testing::source_dir() / "models/default";
  const auto bundle = nlohmann::json::parse(testing::read_file(bundle_dir / "bundle.json"));
  const auto config = vq::parse_vq_config(bundle.at("vq"), "models/default/bundle.json: vq");
  std::vector<std::filesystem::path> files;
  for (const auto& name : bundle.at("vq").at("weights")) files.push_back(bundle_dir / name.get<std::string>());
  const auto decoder = vq::make_vq_decoder(config, io::WeightMap::load_all(files));

  const int64_t grid_h = bundle.at("layout").at("grid_height"), grid_w = bundle.at("layout").at("grid_width");
  at::manual_seed(0);
  const at::Tensor codes = at::randint(config.codebook_size, {grid_h, grid_w}, at::kLong);
  const at::Tensor image = decoder->decode(codes).to(at::kFloat);
  REQUIRE(image.sizes() == at::IntArrayRef{grid_h * config.downsample, grid_w * config.downsample, 3});
  const int64_t side = bundle.at("layout").at("resolutions").at(0);  // the size the bundle draws
  REQUIRE(image.sizes() == at::IntArrayRef{side, side, 3});

  // Brightness varies across the picture ...
  const float luminance_std = image.mean(2).std().item<float>();
  // ... the channels differ (mean per-pixel spread between R, G and B) ...
  const float chroma = (std::get<0>(image.max(2)) - std::get<0>(image.min(2))).mean().item<float>();
  // ... and most pixels are not clipped to black or white.
  const float clipped = (image.eq(0).logical_or(image.eq(255))).to(at::kFloat).mean().item<float>();
  INFO("luminance std " << luminance_std << ", mean chroma " << chroma << ", clipped fraction " << clipped);
  CHECK(luminance_std > 20.0f);
  CHECK(chroma > 30.0f);
  CHECK(clipped < 0.3f);
}
