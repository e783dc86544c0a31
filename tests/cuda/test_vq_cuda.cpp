// The VQ decoder on the GPU (where a generation on a GPU decodes its image) against the
// same weights on the CPU: the default bundle's Chameleon VQGAN on one code grid. cuDNN
// may run float32 convolutions in TF32, so the outputs agree to about 1e-2, not bit for bit.
#include <catch2/catch.hpp>

#include "device_cases.h"
#include "engine/bundle.h"
#include "testing/test_support.h"
#include "vq/vq_decoder.h"

using namespace sjd;

TEST_CASE("the VQ decoder on the GPU draws the CPU's image", "[cuda][vq]") {
  const at::Device device = cuda_testing::device();
  const engine::Bundle bundle = engine::load_bundle(testing::source_dir() / "models" / "default");
  const io::WeightMap weights = io::WeightMap::load_all(bundle.vq_weights);
  const auto on_cpu = vq::make_vq_decoder(bundle.vq, weights);
  const auto on_gpu = vq::make_vq_decoder(bundle.vq, weights, device);
  CHECK(on_gpu->codebook().device() == device);
  at::manual_seed(5);
  const at::Tensor codes = at::randint(bundle.vq.codebook_size, {16, 16}, at::kLong);
  const at::Tensor expected = on_cpu->decode_float(codes);
  const at::Tensor got = on_gpu->decode_float(codes);
  CHECK(got.device() == device);
  CHECK((got.cpu() - expected).abs().max().item<double>() < 2e-2);
  const at::Tensor bytes = on_gpu->decode(codes);  // RGB bytes come back to the host
  CHECK(bytes.device().is_cpu());
  CHECK((bytes.to(at::kInt) - on_cpu->decode(codes).to(at::kInt)).abs().max().item<int>() <= 3);
  // A code outside the codebook is refused on either device, naming it.
  at::Tensor bad = codes.clone();
  bad[3][4] = bundle.vq.codebook_size;
  CHECK_THROWS_WITH(on_gpu->decode(bad), Catch::Contains("at row 3, column 4 is outside the codebook"));
}
