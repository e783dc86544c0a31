#include "family/image_family.h"

#include <stdexcept>

#include "family/lumina_family.h"

namespace sjd::family {

std::unique_ptr<ImageFamily> make_family(const std::string& family, const nlohmann::json& layout,
                                         const text::Tokenizer& tokenizer, int64_t vocab_size, int64_t downsample,
                                         const std::string& where) {
  if (family == "lumina-mgpt") {
    return std::make_unique<LuminaFamily>(parse_lumina_config(layout, downsample, where), tokenizer, vocab_size);
  }
  throw std::invalid_argument(where + ": unknown family \"" + family + "\" (expected lumina-mgpt)");
}

}  // namespace sjd::family
