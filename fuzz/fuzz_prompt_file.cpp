// Prompt files (.txt, .tsv, .csv, .jsonl, or sniffed): PromptFileError naming the
// line, or prompts. The first byte picks the extension.
#include "fuzz_input.h"
#include "io/prompt_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const extensions[] = {".txt", ".tsv", ".csv", ".jsonl", ".prompts"};
  const auto file = sjd::fuzz::write_input(data + 1, size - 1, std::string("prompts") + extensions[data[0] % 5]);
  try {
    for (const auto& entry : sjd::io::read_prompts(file)) {
      if (entry.prompt.empty() || entry.line < 1) __builtin_trap();  // read_prompts promises neither
    }
  } catch (const sjd::io::PromptFileError&) {
  }
  return 0;
}
