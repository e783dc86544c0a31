#pragma once
// Lumina-mGPT (Chameleon vocabulary): prompt = BOS + template text + end-of-turn;
// the model then writes begin-image, height and width tokens, rows of image
// codes each ended by a newline token, end-of-image and end-of-turn (at 768 px:
// 3 + 48 * 49 + 2 = 2357 tokens). The unconditional CFG row starts at
// begin-image with positions from 0; CFG mixes raw logits. Every id comes from
// the bundle's layout, which scripts/sjd_export/lumina.py resolves from the
// release's vocabulary.
#include "family/image_family.h"

namespace sjd::family {

struct LuminaConfig {
  int64_t grid_height = 0, grid_width = 0, downsample = 0;
  int64_t image_token_first = 0, codebook_size = 0;
  int64_t bos_id = 0, begin_image_id = 0, end_image_id = 0, newline_id = 0, end_of_turn_id = 0;
  int64_t size_token_base = 0, size_token_unit_px = 32;
  int64_t max_positions = 0;  // the model's context (config.json max_position_embeddings); 0: not recorded
  std::string prompt_template;
  std::string where;  // the layout's place in bundle.json, for errors
};

// `resolution` (pixels, 0 = the bundle's grid) must be the grid's side or one
// listed in the layout's "resolutions", and a multiple of downsample and of
// size_token_unit_px (the size tokens count pixels in those units).
LuminaConfig parse_lumina_config(const nlohmann::json& layout, int64_t downsample, int64_t resolution,
                                 const std::string& where);

class LuminaFamily : public ImageFamily {
 public:
  LuminaFamily(LuminaConfig config, const text::Tokenizer& tokenizer, int64_t vocab_size);

  const TokenLayout& layout() const override { return layout_; }
  model::RowPrompt conditional(const std::string& prompt) const override;
  model::RowPrompt unconditional(const std::string& prompt) const override;
  sampling::CfgMix cfg_mix() const override { return sampling::CfgMix::kLogits; }
  std::vector<int64_t> prompt_ids(const std::string& prompt, bool with_template) const override;
  int64_t max_positions() const override { return config_.max_positions; }
  int64_t image_height() const override { return config_.grid_height * config_.downsample; }
  int64_t image_width() const override { return config_.grid_width * config_.downsample; }

 private:
  LuminaConfig config_;
  const text::Tokenizer& tokenizer_;
  TokenLayout layout_;
};

}  // namespace sjd::family
