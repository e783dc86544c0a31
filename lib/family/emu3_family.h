#pragma once
// Emu3-Gen family glue.
#include <memory>

#include "family/image_family.h"

namespace sjd::family {

std::unique_ptr<ImageFamily> make_emu3_family(const FamilyContext& context);

}  // namespace sjd::family
