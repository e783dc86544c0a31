// make_vq_decoder: picks the decoder implementation a bundle's `vq.kind` names.
#include "vq/vq_decoder.h"

#include <c10/core/InferenceMode.h>

#include <stdexcept>

#include "vq/chameleon_vqgan.h"
#include "vq/movq_decoder.h"
#include "vq/vq16_decoder.h"

namespace sjd::vq {

namespace {

std::unique_ptr<VQDecoder> make_decoder_of_kind(const VQConfig& config, const io::WeightMap& weights) {
  if (config.kind == "chameleon-vqgan") return std::make_unique<ChameleonVQGAN>(config, weights);
  if (config.kind == "movq") return make_movq_decoder(config, weights);
  if (config.kind == "vq16") return make_vq16_decoder(config, weights);
  // parse_vq_config refuses other kinds, naming the bundle; a config made in code may still hold one.
  throw std::invalid_argument("vq.kind: unknown VQ decoder \"" + config.kind + "\" (known: " +
                              known_vq_decoder_kinds() + ")");
}

std::unique_ptr<VQDecoder> make_on_loaded_device(const VQConfig& config, const io::WeightMap& weights) {
  try {
    return make_decoder_of_kind(config, weights);
  } catch (const io::WeightError& error) {
    // The checkpoint may be right and the bundle wrong (vq.ch mistyped reads as a mis-shaped conv_in):
    // say which keys set the expectation.
    if (config.where.empty()) throw;
    nlohmann::json keys = config.raw;
    keys.erase("weights");
    throw io::WeightError(std::string(error.what()) + " (the expected tensors follow from " + config.where + ": " +
                          keys.dump() + ")");
  }
}

}  // namespace

std::unique_ptr<VQDecoder> make_vq_decoder(const VQConfig& config, const io::WeightMap& weights, at::Device device) {
  if (device.is_cpu()) return make_on_loaded_device(config, weights);
  // The decoders keep the tensors they load where they find them: a device copy of the map.
  io::WeightMap on_device;
  for (const std::string& name : weights.names()) {
    on_device.insert(name, weights.get(name).to(device), weights.source_of(name));
  }
  return make_on_loaded_device(config, on_device);
}

at::Tensor VQDecoder::decode(const at::Tensor& codes) const {
  return to_rgb_bytes(decode_float(codes)).to(at::kCPU);
}

at::Tensor codebook_rows(const at::Tensor& codebook, const at::Tensor& codes_in, const std::string& kind) {
  if (codes_in.dim() != 2 || codes_in.size(0) == 0 || codes_in.size(1) == 0) {
    throw std::invalid_argument("VQ decode (" + kind + "): codes must be a non-empty [H, W] grid, got shape " +
                                c10::str(codes_in.sizes()));
  }
  if (at::isFloatingType(codes_in.scalar_type()) || codes_in.scalar_type() == at::kBool) {
    throw std::invalid_argument("VQ decode (" + kind + "): codes must be integers, got " +
                                std::string(c10::toString(codes_in.scalar_type())));
  }
  const at::Tensor codes = codes_in.to(at::kCPU, at::kLong).contiguous();
  const int64_t size = codebook.size(0);
  const at::Tensor bad = (codes < 0).logical_or(codes >= size).nonzero();
  if (bad.size(0) > 0) {
    const int64_t row = bad[0][0].item<int64_t>(), col = bad[0][1].item<int64_t>();
    throw std::out_of_range("VQ decode (" + kind + "): code " + std::to_string(codes[row][col].item<int64_t>()) +
                            " at row " + std::to_string(row) + ", column " + std::to_string(col) +
                            " is outside the codebook [0, " + std::to_string(size) + ")");
  }
  return codebook.index_select(0, codes.reshape({-1}).to(codebook.device()))
      .reshape({codes.size(0), codes.size(1), codebook.size(1)});
}

at::Tensor to_rgb_bytes(const at::Tensor& image) {
  c10::InferenceMode inference;
  // Values are in [0, 255] after the clamp, so the cast truncates like numpy's astype(uint8).
  const at::Tensor scaled = (image.clamp(-1.0, 1.0) + 1.0) / 2.0 * 255.0;
  return scaled.permute({1, 2, 0}).to(at::kByte).contiguous();
}

}  // namespace sjd::vq
