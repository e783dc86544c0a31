#include "vq_test_weights.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace sjd::vq::testing {

VQConfig tiny_config() {
  VQConfig c;
  c.kind = "chameleon-vqgan";
  c.codebook_size = 16;
  c.embed_dim = 4;
  c.z_channels = 8;
  c.ch = 32;
  c.ch_mult = {2, 3};
  c.num_res_blocks = 1;
  c.resolution = 8;          // level 0 side 8, level 1 side 4
  c.attn_resolutions = {4};  // attention on level 1
  c.out_channels = 3;
  c.downsample = 2;
  return c;
}

namespace {

class TensorMaker {
 public:
  explicit TensorMaker(uint64_t seed) : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  void conv(const std::string& prefix, int64_t in, int64_t out, int64_t kernel) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(in * kernel * kernel));
    out_[prefix + ".weight"] = normal({out, in, kernel, kernel}) * scale;
    out_[prefix + ".bias"] = normal({out}) * 0.1;
  }
  void norm(const std::string& prefix, int64_t channels) {
    out_[prefix + ".weight"] = 1.0 + normal({channels}) * 0.1;
    out_[prefix + ".bias"] = normal({channels}) * 0.1;
  }
  void resnet(const std::string& prefix, int64_t in, int64_t out) {
    norm(prefix + ".norm1", in);
    conv(prefix + ".conv1", in, out, 3);
    norm(prefix + ".norm2", out);
    conv(prefix + ".conv2", out, out, 3);
    if (in != out) conv(prefix + ".nin_shortcut", in, out, 1);
  }
  void attn(const std::string& prefix, int64_t channels) {
    norm(prefix + ".norm", channels);
    for (const char* part : {".q", ".k", ".v", ".proj_out"}) conv(prefix + part, channels, channels, 1);
  }
  at::Tensor normal(at::IntArrayRef shape) { return at::normal(0.0, 1.0, shape, generator_); }

  std::map<std::string, at::Tensor> take() { return std::move(out_); }
  std::map<std::string, at::Tensor>& tensors() { return out_; }

 private:
  at::Generator generator_;
  std::map<std::string, at::Tensor> out_;
};

}  // namespace

std::map<std::string, at::Tensor> random_vqgan_tensors(const VQConfig& c, uint64_t seed) {
  TensorMaker make(seed);
  make.tensors()["quantize.embedding.weight"] = make.normal({c.codebook_size, c.embed_dim});
  make.conv("post_quant_conv", c.embed_dim, c.z_channels, 1);
  const int64_t levels = static_cast<int64_t>(c.ch_mult.size());
  int64_t channels = c.ch * c.ch_mult.back();
  make.conv("decoder.conv_in", c.z_channels, channels, 3);
  make.resnet("decoder.mid.block_1", channels, channels);
  make.attn("decoder.mid.attn_1", channels);
  make.resnet("decoder.mid.block_2", channels, channels);
  for (int64_t level = levels - 1; level >= 0; --level) {
    const std::string prefix = "decoder.up." + std::to_string(level);
    const int64_t out = c.ch * c.ch_mult[level];
    bool attention = false;
    for (int64_t r : c.attn_resolutions) attention = attention || r == (c.resolution >> level);
    for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
      make.resnet(prefix + ".block." + std::to_string(j), channels, out);
      if (attention) make.attn(prefix + ".attn." + std::to_string(j), out);
      channels = out;
    }
    if (level > 0) make.conv(prefix + ".upsample.conv", out, out, 3);
  }
  make.norm("decoder.norm_out", channels);
  make.conv("decoder.conv_out", channels, c.out_channels, 3);
  return make.take();
}

io::WeightMap to_weight_map(const std::map<std::string, at::Tensor>& tensors, const std::string& source) {
  io::WeightMap weights;
  for (const auto& [name, tensor] : tensors) weights.insert(name, tensor, source);
  return weights;
}

}  // namespace sjd::vq::testing
