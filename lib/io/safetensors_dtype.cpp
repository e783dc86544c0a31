#include "io/safetensors_dtype.h"

#include <array>
#include <utility>

namespace sjd::io {
namespace {

constexpr std::array<std::pair<const char*, at::ScalarType>, 10> kDtypes{{
    {"BF16", at::kBFloat16},
    {"F16", at::kHalf},
    {"F32", at::kFloat},
    {"F64", at::kDouble},
    {"I64", at::kLong},
    {"I32", at::kInt},
    {"I16", at::kShort},
    {"I8", at::kChar},
    {"U8", at::kByte},
    {"BOOL", at::kBool},
}};

}  // namespace

std::optional<at::ScalarType> scalar_type_of_safetensors_dtype(const std::string& name) {
  for (const auto& [dtype_name, type] : kDtypes) {
    if (name == dtype_name) return type;
  }
  return std::nullopt;
}

std::optional<std::string> safetensors_dtype_of(at::ScalarType type) {
  for (const auto& [dtype_name, dtype_type] : kDtypes) {
    if (type == dtype_type) return std::string(dtype_name);
  }
  return std::nullopt;
}

}  // namespace sjd::io
