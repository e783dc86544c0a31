#pragma once
// LlamaGen T2I (FoundationVision/LlamaGen, sample_t2i.py + generate.py):
//  - the prompt is cleaned (twice, as the reference does), SentencePiece-tokenised,
//    cut to caption_length - 1 tokens and ended by </s>; FLAN-T5-XL encodes it;
//  - the caption prefix has caption_length (120) slots, left-padded: the n valid
//    rows sit at the end, pad rows are zero; cls_embedding.cap_proj (fc1, GELU-tanh,
//    fc2, no biases) projects every slot to the transformer's width, so pad rows
//    stay zero; keys of pad slots are masked (each slot still sees itself);
//  - caption slots have no rotary position (2D RoPE zeroes their q/k); image token
//    t sits at grid cell t; the last caption slot predicts the first image token;
//  - the unconditional CFG row is cls_embedding.uncond_embedding through the same
//    projection, with the conditional prompt's caption mask (generate.py masks
//    both halves of the CFG batch with the same emb_masks); CFG mixes logits;
//  - the generated sequence is grid*grid image codes, id = code, nothing forced.
#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "family/image_family.h"
#include "model/t5_encoder.h"

namespace sjd::family {

struct LlamaGenConfig {
  int64_t grid_size = 0;       // the image is grid_size x grid_size codes
  int64_t downsample = 0;      // pixels per code
  int64_t first_code_id = 0;   // token id of code 0
  int64_t codebook_size = 0;
  int64_t caption_length = 0;  // caption slots before the image (120)
};

// Reads the bundle's "layout" and the transformer's grid_width/caption_length;
// `resolution` other than the bundle's is rejected naming the supported one.
LlamaGenConfig parse_llamagen_config(const FamilyContext& context);

// cls_embedding: the caption projection and the learned unconditional caption.
struct CaptionEmbedder {
  at::Tensor fc1;     // [hidden, caption_dim]
  at::Tensor fc2;     // [hidden, hidden]
  at::Tensor uncond;  // [caption_length, caption_dim]

  // Reads and shape-checks `cls_embedding.*` (io::WeightError names a missing or mis-shaped tensor).
  static CaptionEmbedder load(const io::WeightMap& weights, int64_t hidden, int64_t caption_dim,
                              int64_t caption_length);
  // [slots, caption_dim] -> [slots, hidden]: fc2(gelu_tanh(fc1(x))).
  at::Tensor project(const at::Tensor& caption) const;
};

class LlamaGenFamily : public ImageFamily {
 public:
  // `encoder` is null for a family built only to tokenise (no weights); then
  // conditional() and unconditional() throw std::logic_error.
  LlamaGenFamily(LlamaGenConfig config, const text::Tokenizer& tokenizer, int64_t vocab_size,
                 std::shared_ptr<const model::T5Encoder> encoder, CaptionEmbedder embedder);

  const TokenLayout& layout() const override { return layout_; }
  model::RowPrompt conditional(const std::string& prompt) const override;
  // The learned unconditional caption under the mask of `prompt`'s caption.
  model::RowPrompt unconditional(const std::string& prompt) const override;
  // conditional(text), kept for the next call: a batch asks for the same negative prompt once per image,
  // and a T5 encoding is the dearest part of a LlamaGen prompt on a CPU.
  model::RowPrompt negative(const std::string& text) const override;
  sampling::CfgMix cfg_mix() const override { return sampling::CfgMix::kLogits; }
  bool fixed_prompt_rows() const override { return true; }  // caption_length slots at position -1
  // with_template: the T5 input ids (cleaned text, truncated, </s> appended).
  std::vector<int64_t> prompt_ids(const std::string& prompt, bool with_template) const override;
  std::string prompt_warning(const std::string& prompt) const override;
  int64_t image_height() const override { return config_.grid_size * config_.downsample; }
  int64_t image_width() const override { return config_.grid_size * config_.downsample; }

  // The unconditional row for a caption with `valid` T5 tokens.
  model::RowPrompt unconditional_row(int64_t valid) const;

 private:
  // The cleaned caption's T5 ids, before the cut to caption_length - 1.
  std::vector<int64_t> caption_ids(const std::string& prompt) const;
  // Caption rows [caption_length, caption_dim] projected, as a row with the mask of `valid` tokens.
  model::RowPrompt caption_row(const at::Tensor& caption, int64_t valid) const;

  LlamaGenConfig config_;
  const text::Tokenizer& tokenizer_;
  int64_t eos_id_;
  TokenLayout layout_;
  std::shared_ptr<const model::T5Encoder> encoder_;
  CaptionEmbedder embedder_;
  mutable std::mutex negative_mutex_;
  mutable std::optional<std::pair<std::string, model::RowPrompt>> last_negative_;  // text and its row
};

std::unique_ptr<ImageFamily> make_llamagen_family(const FamilyContext& context);

}  // namespace sjd::family
