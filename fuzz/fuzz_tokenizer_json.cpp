// HF tokenizer.json: loading and encoding must fail with TokenizerError only.
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = sjd::fuzz::write_input(data, size, "tokenizer.json");
  try {
    const auto tokenizer = sjd::text::load_tokenizer("bpe", file, nlohmann::json::object());
    for (const char* text : {"a red circle on the left", "  \xC3\xA9t\xC3\xA9 <s> 123\n", ""}) {
      const auto ids = tokenizer->encode(text);
      tokenizer->decode(ids);
    }
  } catch (const sjd::text::TokenizerError&) {
  }
  return 0;
}
