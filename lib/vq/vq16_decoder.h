#pragma once
// LlamaGen's VQ-16 decoder (`vq_ds16_t2i.pt`, tokenizer/tokenizer_image/vq_model.py):
// codebook rows L2-normalised at lookup, post_quant_conv, then a taming-style
// decoder with LlamaGen's own key names:
//   decoder.conv_in; decoder.mid.{0,1,2} = (res, attn, res);
//   decoder.conv_blocks.{i}, i = 0 .. levels-1, from the lowest resolution up:
//     channels ch * ch_mult[levels-1-i], res.{0..num_res_blocks}, attn.{j} beside
//     every res block of conv_blocks.0 only, upsample.conv after every block but the last;
//   decoder.norm_out, swish, decoder.conv_out.
// Bundle keys (`vq` object, kind "vq16"): the common VQConfig numbers, with
// attn_resolutions [] (attention placement is fixed by the architecture), plus
// "codebook_l2_norm" (bool, default true).
#include <memory>

#include "vq/vq_decoder.h"

namespace sjd::vq {

std::unique_ptr<VQDecoder> make_vq16_decoder(const VQConfig& config, const io::WeightMap& weights);

}  // namespace sjd::vq
