#pragma once
// LlamaGen T2I family glue.
#include <memory>

#include "family/image_family.h"

namespace sjd::family {

std::unique_ptr<ImageFamily> make_llamagen_family(const FamilyContext& context);

}  // namespace sjd::family
