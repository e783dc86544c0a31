#pragma once
// The dtype names of the safetensors header and the ATen types they map to
// (the subset sjd reads and writes).
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace sjd::io {

// The ATen type for a header dtype such as "BF16"; nullopt for names sjd does not support.
std::optional<at::ScalarType> scalar_type_of_safetensors_dtype(const std::string& name);

// The header dtype name for an ATen type; nullopt for types safetensors has no name for here.
std::optional<std::string> safetensors_dtype_of(at::ScalarType type);

}  // namespace sjd::io
