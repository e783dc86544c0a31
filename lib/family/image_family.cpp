#include "family/image_family.h"

#include <stdexcept>

#include "family/emu3_family.h"
#include "family/llamagen_family.h"
#include "family/lumina_family.h"

namespace sjd::family {

std::unique_ptr<ImageFamily> make_family(const FamilyContext& c) {
  const std::string where = c.where + ": layout";
  const nlohmann::json layout = c.bundle.value("layout", nlohmann::json::object());
  if (c.family == "lumina-mgpt") {
    return std::make_unique<LuminaFamily>(parse_lumina_config(layout, c.downsample, c.resolution, where),
                                          *c.tokenizer, c.vocab_size);
  }
  if (c.family == "emu3") return make_emu3_family(c);
  if (c.family == "llamagen") return make_llamagen_family(c);
  throw std::invalid_argument(c.where + ": unknown family \"" + c.family +
                              "\" (expected lumina-mgpt, emu3 or llamagen)");
}

}  // namespace sjd::family
