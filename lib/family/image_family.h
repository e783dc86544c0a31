#pragma once
// Per-family glue: how a prompt becomes the model's rows (conditional and
// unconditional), what the generated sequence looks like, and how CFG mixes.
// Everything else (model, loop, methods) is shared by all families.
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "family/token_layout.h"
#include "model/token_model.h"
#include "sampling/logits_pipeline.h"
#include "text/tokenizer.h"

namespace sjd::family {

class ImageFamily {
 public:
  virtual ~ImageFamily() = default;
  virtual const TokenLayout& layout() const = 0;
  virtual model::RowPrompt conditional(const std::string& prompt) const = 0;
  virtual model::RowPrompt unconditional() const = 0;
  virtual sampling::CfgMix cfg_mix() const = 0;
  // Prompt ids as the model sees them, with or without the template.
  virtual std::vector<int64_t> prompt_ids(const std::string& prompt, bool with_template) const = 0;
  // Image side in pixels (for the template and size tokens).
  virtual int64_t image_height() const = 0;
  virtual int64_t image_width() const = 0;
};

// Builds the family named by a bundle from its "layout" object; `where` names
// that object in errors. The tokenizer must outlive the family.
std::unique_ptr<ImageFamily> make_family(const std::string& family, const nlohmann::json& layout,
                                         const text::Tokenizer& tokenizer, int64_t vocab_size, int64_t downsample,
                                         const std::string& where);

}  // namespace sjd::family
