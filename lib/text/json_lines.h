#pragma once
// Batch encoding for `sjd tokenize --json-lines FILE` and the parity tests:
// one JSON string per line in, one list of ids per string out.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace sjd::text {

// Encodes every line of `input` that holds a JSON string; blank lines are
// skipped. Throws TokenizerError naming `source_name` and the line for a line
// that is not a JSON string, or text the tokenizer refuses.
std::vector<std::vector<int64_t>> encode_json_lines(const Tokenizer& tokenizer, std::istream& input,
                                                    const std::string& source_name = "input");

}  // namespace sjd::text
