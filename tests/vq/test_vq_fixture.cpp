// Parity with an independent PyTorch decoder: tests/python/test_vq_decoder.py
// writes a fixture directory and runs this case with SJD_VQ_FIXTURE_DIR set.
// Hidden ([.]) so a plain run or CTest does not list a case that has nothing
// to compare; run on its own it fails, saying why. (A skip would print CTest's
// skip marker into the Python test's output, and CTest would then report that
// test's failure as a skip.)
//
// Fixture directory: vq.json (a bundle `vq` object), vqgan.safetensors (the
// weights), fixture.safetensors with codes I64 [H, W], expected U8
// [H*ds, W*ds, 3] and expected_float F32 [3, H*ds, W*ds] (before clamping).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>

#include "io/safetensors.h"
#include "testing/test_support.h"
#include "vq/chameleon_vqgan.h"

using namespace sjd;

TEST_CASE("chameleon-vqgan matches the PyTorch reference fixture", "[.][fixture]") {
  const char* dir_env = std::getenv("SJD_VQ_FIXTURE_DIR");
  {
    INFO("SJD_VQ_FIXTURE_DIR is not set (tests/python/test_vq_decoder.py sets it)");
    REQUIRE((dir_env != nullptr && *dir_env != '\0'));
  }
  const std::filesystem::path dir(dir_env);
  const auto config_path = dir / "vq.json";
  const auto config =
      vq::parse_vq_config(nlohmann::json::parse(testing::read_file(config_path)), config_path.string());
  const vq::ChameleonVQGAN decoder(config, io::WeightMap::load(dir / "vqgan.safetensors"));
  const auto fixture = io::read_safetensors(dir / "fixture.safetensors").tensors;
  const at::Tensor& codes = fixture.at("codes");
  const at::Tensor& expected = fixture.at("expected");
  const at::Tensor& expected_float = fixture.at("expected_float");

  const at::Tensor output = decoder.decode_float(codes);
  REQUIRE(output.sizes() == expected_float.sizes());
  const float float_error = (output - expected_float).abs().max().item<float>();
  const at::Tensor image = vq::to_rgb_bytes(output);
  REQUIRE(image.sizes() == expected.sizes());
  const at::Tensor byte_diff = (image.to(at::kInt) - expected.to(at::kInt)).abs();
  const int max_byte_diff = byte_diff.max().item<int>();
  const int64_t differing = byte_diff.ne(0).sum().item<int64_t>();
  WARN("fixture " << dir.string() << ": codes " << codes.sizes() << ", float max abs error " << float_error
                  << ", uint8 max abs diff " << max_byte_diff << " (" << differing << " of " << byte_diff.numel()
                  << " values differ)");
  // Truncation to bytes can flip a value sitting on an integer boundary by 1.
  CHECK(max_byte_diff <= 1);
  CHECK(float_error < 1e-3f);
}
