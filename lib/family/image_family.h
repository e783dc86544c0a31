#pragma once
// Per-family glue: how a prompt becomes the model's rows (conditional and
// unconditional), what the generated sequence looks like, and how CFG mixes.
// Everything else (model, loop, methods) is shared by all families.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "family/token_layout.h"
#include "io/weights.h"
#include "model/token_model.h"
#include "sampling/logits_pipeline.h"
#include "text/tokenizer.h"

namespace sjd::family {

class ImageFamily {
 public:
  virtual ~ImageFamily() = default;
  virtual const TokenLayout& layout() const = 0;
  virtual model::RowPrompt conditional(const std::string& prompt) const = 0;
  // The unconditional CFG row for `prompt` (families that need nothing of the
  // prompt ignore it; LlamaGen reuses its caption mask).
  virtual model::RowPrompt unconditional(const std::string& prompt) const = 0;
  // The CFG row for a user's negative prompt (--negative-prompt), in the unconditional row's place.
  // Lumina-mGPT and LlamaGen train their unconditional rows without text, so theirs is the
  // conditional row of that text; Emu3's replaces its bundle's negative prompt.
  virtual model::RowPrompt negative(const std::string& text) const { return conditional(text); }
  virtual sampling::CfgMix cfg_mix() const = 0;
  // Prompt ids as the model sees them, with or without the template.
  virtual std::vector<int64_t> prompt_ids(const std::string& prompt, bool with_template) const = 0;
  // True where every prompt's rows have the same length and positions (LlamaGen: its caption's
  // fixed slots), so one prompt measures a batch's rows and the others need no encoding for it.
  virtual bool fixed_prompt_rows() const { return false; }
  // The positions the model was trained for (its config.json's max_position_embeddings, as the
  // bundle's layout.max_positions), or 0 when the bundle does not say (LlamaGen: its caption has
  // fixed slots, so no prompt makes a sequence longer).
  virtual int64_t max_positions() const { return 0; }
  // What of `prompt` the model will not see, as a warning ("" when it sees all of it): LlamaGen reads
  // a caption of at most caption_length - 1 T5 tokens and drops the rest, as its reference code does.
  virtual std::string prompt_warning(const std::string& /*prompt*/) const { return ""; }
  // Image side in pixels (for the template and size tokens).
  virtual int64_t image_height() const = 0;
  virtual int64_t image_width() const = 0;
};

// What a family may read to build itself. Families read their own sections of
// the bundle ("layout", and e.g. LlamaGen's "text_encoder").
struct FamilyContext {
  std::string family;
  nlohmann::json bundle;                // the whole bundle.json
  std::filesystem::path bundle_dir;
  std::string where;                    // bundle.json's path, for errors
  const text::Tokenizer* tokenizer = nullptr;  // must outlive the family
  const io::WeightMap* weights = nullptr;      // transformer tensors; null when only tokenizing
  int64_t vocab_size = 0;
  int64_t downsample = 0;               // VQ pixels per code
  int64_t resolution = 0;               // requested image side in pixels; 0 = the bundle's grid
  bool trust_code = false;              // --trust-code: weight files of its own may be TorchScript archives
};

// Builds the family the context names; an unknown family or an unsupported
// resolution is std::invalid_argument naming the bundle and value.
std::unique_ptr<ImageFamily> make_family(const FamilyContext& context);

}  // namespace sjd::family
