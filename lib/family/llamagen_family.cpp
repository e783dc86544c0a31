#include "family/llamagen_family.h"

#include <stdexcept>

namespace sjd::family {

// Placeholder until the family lands (issue 4).
std::unique_ptr<ImageFamily> make_llamagen_family(const FamilyContext& context) {
  throw std::invalid_argument(context.where + ": family \"" + context.family + "\" is not implemented yet");
}

}  // namespace sjd::family
