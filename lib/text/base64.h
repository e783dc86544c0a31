#pragma once
// Standard base64 (RFC 4648 alphabet, '=' padding), as tiktoken vocabularies spell token bytes.
#include <string>
#include <string_view>

namespace sjd::text {

// Appends the bytes `encoded` stands for to `out`; false (with `out` unspecified) when it is not base64.
bool base64_decode(std::string_view encoded, std::string& out);

}  // namespace sjd::text
