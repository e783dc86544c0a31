// PNG files read back by sjd (batch resume, tests): PngError for anything malformed.
#include "fuzz_input.h"
#include "io/png_chunks.h"
#include "io/png_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = sjd::fuzz::write_input(data, size, "input.png");
  try {
    sjd::io::read_png_text(file);
    sjd::io::read_png_size(file);
  } catch (const sjd::io::PngError&) {
  }
  return 0;
}
