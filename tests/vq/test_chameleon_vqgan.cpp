// The Chameleon VQGAN decoder on random tiny checkpoints: output shape and
// type, that every loaded tensor shapes the output, and the error messages.
// Numerical parity with an independent PyTorch decoder is
// tests/python/test_vq_decoder.py (through the [fixture] test case).
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include "vq/chameleon_vqgan.h"
#include "vq_test_weights.h"

using namespace sjd::vq;
using Catch::Matchers::Contains;

namespace {

at::Tensor random_codes(int64_t height, int64_t width, int64_t codebook_size, uint64_t seed) {
  at::manual_seed(seed);
  return at::randint(codebook_size, {height, width}, at::kLong);
}

std::string error_of(const VQConfig& config, const std::map<std::string, at::Tensor>& tensors) {
  try {
    make_vq_decoder(config, testing::to_weight_map(tensors, "tiny_vqgan.safetensors"));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("chameleon-vqgan decodes an H x W grid to H*ds x W*ds RGB bytes", "[vq]") {
  const auto config = testing::tiny_config();
  const auto decoder = make_vq_decoder(config, testing::to_weight_map(testing::random_vqgan_tensors(config, 1), "w"));
  const at::Tensor image = decoder->decode(random_codes(3, 5, config.codebook_size, 2));
  CHECK(image.sizes() == at::IntArrayRef{6, 10, 3});
  CHECK(image.scalar_type() == at::kByte);
  CHECK(image.device().is_cpu());
  // A random decoder's output is not constant: the pixels carry the codes.
  CHECK(image.to(at::kFloat).std().item<float>() > 1.0f);
}

TEST_CASE("chameleon-vqgan accepts any integer code type and codes on their own", "[vq]") {
  const auto config = testing::tiny_config();
  const auto decoder = make_vq_decoder(config, testing::to_weight_map(testing::random_vqgan_tensors(config, 1), "w"));
  const at::Tensor codes = random_codes(4, 4, config.codebook_size, 3);
  const at::Tensor as_long = decoder->decode(codes);
  CHECK(at::equal(decoder->decode(codes.to(at::kInt)), as_long));
  // Changing one code changes the image: the lookup is actually used.
  at::Tensor other = codes.clone();
  other[1][2] = (other[1][2].item<int64_t>() + 1) % config.codebook_size;
  CHECK_FALSE(at::equal(decoder->decode(other), as_long));
}

TEST_CASE("chameleon-vqgan exposes the codebook", "[vq]") {
  const auto config = testing::tiny_config();
  const auto tensors = testing::random_vqgan_tensors(config, 4);
  const auto decoder = make_vq_decoder(config, testing::to_weight_map(tensors, "w"));
  const at::Tensor codebook = decoder->codebook();
  CHECK(codebook.sizes() == at::IntArrayRef{config.codebook_size, config.embed_dim});
  CHECK(at::equal(codebook, tensors.at("quantize.embedding.weight")));
}

TEST_CASE("every tensor of the checkpoint influences the decoded image", "[vq]") {
  // Catches a block that is loaded but skipped, or two tensors swapped in use.
  // ~140 decodes of tiny tensors: on a loaded machine ATen's thread pool spends
  // far longer synchronising than computing (50 s instead of 1 s), so one thread.
  at::set_num_threads(1);
  const auto config = testing::tiny_config();
  const auto tensors = testing::random_vqgan_tensors(config, 5);
  const at::Tensor codes = random_codes(2, 3, config.codebook_size, 6);
  const at::Tensor reference = ChameleonVQGAN(config, testing::to_weight_map(tensors, "w")).decode_float(codes);
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  at::manual_seed(12);
  for (const auto& [name, tensor] : tensors) {
    if (name == "quantize.embedding.weight") continue;  // only the rows the codes pick matter
    // A key bias adds q_i . b to every score of row i: softmax cancels it.
    if (ends_with(name, ".k.bias")) continue;
    auto changed = tensors;
    // Random, not constant: a constant shift of a conv bias feeding a
    // GroupNorm would cancel out.
    changed[name] = tensor + at::randn_like(tensor) * 0.5;
    const at::Tensor output = ChameleonVQGAN(config, testing::to_weight_map(changed, "w")).decode_float(codes);
    INFO("perturbed " << name);
    CHECK((output - reference).abs().max().item<float>() > 1e-4f);
  }
}

TEST_CASE("chameleon-vqgan names a missing tensor and the file", "[vq][errors]") {
  const auto config = testing::tiny_config();
  auto tensors = testing::random_vqgan_tensors(config, 7);
  tensors.erase("decoder.up.1.attn.1.proj_out.weight");
  CHECK_THAT(error_of(config, tensors),
             Contains("decoder.up.1.attn.1.proj_out.weight") && Contains("tiny_vqgan.safetensors"));
}

TEST_CASE("chameleon-vqgan names a mis-shaped tensor with both shapes", "[vq][errors]") {
  const auto config = testing::tiny_config();
  auto tensors = testing::random_vqgan_tensors(config, 8);
  tensors["decoder.up.0.block.0.nin_shortcut.weight"] = at::zeros({64, 96, 3, 3});  // 1x1 expected
  CHECK_THAT(error_of(config, tensors), Contains("decoder.up.0.block.0.nin_shortcut.weight") &&
                                            Contains("[64, 96, 1, 1]") && Contains("[64, 96, 3, 3]") &&
                                            Contains("tiny_vqgan.safetensors"));
}

TEST_CASE("chameleon-vqgan refuses an integer or boolean tensor where a weight belongs", "[vq][errors]") {
  const auto config = testing::tiny_config();
  auto tensors = testing::random_vqgan_tensors(config, 8);
  for (const at::ScalarType dtype : {at::kInt, at::kBool}) {
    // Cast to float it would decode (7s or 1s for a bias), as the loader once let it.
    tensors["decoder.conv_in.bias"] = at::ones(tensors["decoder.conv_in.bias"].sizes(), dtype);
    CHECK_THAT(error_of(config, tensors), Contains("decoder.conv_in.bias") && Contains("tiny_vqgan.safetensors") &&
                                              Contains("must be floating point"));
  }
}

TEST_CASE("a config whose widths do not match the checkpoint is a shape error", "[vq][errors]") {
  auto config = testing::tiny_config();
  const auto tensors = testing::random_vqgan_tensors(config, 9);
  config.z_channels = 16;
  CHECK_THAT(error_of(config, tensors), Contains("post_quant_conv.weight") && Contains("[16, 4, 1, 1]"));
}

TEST_CASE("chameleon-vqgan rejects architectures it cannot run", "[vq][errors]") {
  auto config = testing::tiny_config();
  const auto tensors = testing::random_vqgan_tensors(config, 10);
  SECTION("GroupNorm width") {
    config.ch = 40;
    CHECK_THAT(error_of(config, tensors), Contains("vq.ch_mult[0]") && Contains("multiple of 32"));
  }
  SECTION("non-RGB output") {
    config.out_channels = 4;
    CHECK_THAT(error_of(config, tensors), Contains("vq.out_channels"));
  }
}

TEST_CASE("chameleon-vqgan rejects codes outside the codebook or of the wrong form", "[vq][errors]") {
  const auto config = testing::tiny_config();
  const auto decoder = make_vq_decoder(config, testing::to_weight_map(testing::random_vqgan_tensors(config, 11), "w"));
  at::Tensor codes = at::zeros({3, 4}, at::kLong);
  SECTION("too large") {
    codes[2][1] = config.codebook_size;
    CHECK_THROWS_WITH(decoder->decode(codes), Contains("code 16 at row 2, column 1") && Contains("[0, 16)"));
  }
  SECTION("negative") {
    codes[0][3] = -1;
    CHECK_THROWS_WITH(decoder->decode(codes), Contains("code -1 at row 0, column 3"));
  }
  SECTION("not a grid") {
    CHECK_THROWS_WITH(decoder->decode(codes.reshape({-1})), Contains("[H, W]"));
  }
  SECTION("floating point") {
    CHECK_THROWS_WITH(decoder->decode(codes.to(at::kFloat)), Contains("integers"));
  }
}

TEST_CASE("to_rgb_bytes maps [-1, 1] to bytes like the reference conversion", "[vq]") {
  // (clamp(x, -1, 1) + 1) / 2 * 255, truncated: values worked out by hand.
  const at::Tensor x = at::tensor({-2.0f, -1.0f, -0.99f, 0.0f, 0.5f, 1.0f, 3.0f}).reshape({1, 1, 7}).expand({3, 1, 7});
  const at::Tensor bytes = to_rgb_bytes(x);
  REQUIRE(bytes.sizes() == at::IntArrayRef{1, 7, 3});
  const std::vector<int> expected{0, 0, 1, 127, 191, 255, 255};
  for (int i = 0; i < 7; ++i) {
    INFO("input " << x[0][0][i].item<float>());
    CHECK(bytes[0][i][0].item<uint8_t>() == expected[i]);
  }
}
