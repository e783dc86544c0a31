#pragma once
// Emu3-Gen (BAAI): the prompt row is
//   bos + prompt + positive_prompt + image_start + "{H}*{W}" + image_token
// tokenised as one text (special-token names included), H and W being the
// image side in VQ cells. The model then writes H rows of (W visual tokens +
// eol), then eof, image_end and eos: H*(W+1)+3 tokens, 8193 at 720 px. The
// unconditional CFG row is the same template around the negative prompt, with
// its own positions from 0; CFG mixes log-probabilities.
#include <memory>
#include <string>

#include "family/image_family.h"

namespace sjd::family {

// Special tokens by name, as the release's tokenizer spells them; their ids
// come from the tokenizer (the exporter fills its special-token table from
// emu3.tiktoken's rank count and emu3_vision_tokens.txt).
struct Emu3TokenNames {
  std::string bos, eos, image_start, image_end, image_token, eol, eof;
  std::string visual_first, visual_last;  // visual tokens of codes 0 and codebook_size - 1
};

struct Emu3Config {
  int64_t grid_height = 0, grid_width = 0, downsample = 0;
  int64_t codebook_size = 0;
  int64_t max_positions = 0;  // the model's context (config.json max_position_embeddings)
  Emu3TokenNames names;
  std::string positive_prompt, negative_prompt;
  std::string size_template;  // "{H}*{W}", H and W in VQ cells
};

// The ids of the special tokens, resolved through the tokenizer.
struct Emu3Ids {
  int64_t bos = 0, eos = 0, image_start = 0, image_end = 0, image_token = 0, eol = 0, eof = 0;
  int64_t visual_first = 0;
};

// Emu3's size rule (its processor's calculate_generate_size for ratio 1:1): an
// image of area A gets a square grid of round(sqrt(A) / downsample) cells a
// side, rounding halves to even as Python does.
int64_t emu3_grid_side(double image_area, int64_t downsample);

// Reads the bundle's "layout" (kind "emu3"); `resolution` (pixels, 0 = the
// layout's image_area) must be a multiple of `downsample` whose sequence fits
// max_positions. Errors name the bundle key or the resolution.
Emu3Config parse_emu3_config(const nlohmann::json& layout, int64_t downsample, int64_t resolution,
                             const std::string& where);

// Each name of `config` looked up in `tokenizer`; a name that is not one
// special token, or visual tokens that are not codebook_size consecutive ids,
// is an error naming the layout key.
Emu3Ids resolve_emu3_ids(const Emu3Config& config, const text::Tokenizer& tokenizer, const std::string& where);

class Emu3Family : public ImageFamily {
 public:
  Emu3Family(Emu3Config config, const text::Tokenizer& tokenizer, int64_t vocab_size, const std::string& where);

  const TokenLayout& layout() const override { return layout_; }
  model::RowPrompt conditional(const std::string& prompt) const override;
  model::RowPrompt unconditional(const std::string& prompt) const override;
  model::RowPrompt negative(const std::string& text) const override;
  sampling::CfgMix cfg_mix() const override { return sampling::CfgMix::kLogProbs; }
  std::vector<int64_t> prompt_ids(const std::string& prompt, bool with_template) const override;
  int64_t max_positions() const override { return config_.max_positions; }
  int64_t image_height() const override { return config_.grid_height * config_.downsample; }
  int64_t image_width() const override { return config_.grid_width * config_.downsample; }

 private:
  // bos + text + image_start + size + image_token, tokenised.
  std::vector<int64_t> template_ids(const std::string& text) const;
  // A row at positions 0.., every slot visible.
  static model::RowPrompt row_of(const std::vector<int64_t>& tokens);

  Emu3Config config_;
  const text::Tokenizer& tokenizer_;
  Emu3Ids ids_;
  TokenLayout layout_;
};

std::unique_ptr<ImageFamily> make_emu3_family(const FamilyContext& context);

}  // namespace sjd::family
