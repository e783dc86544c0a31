// bundle.json: every section parser and the settings layer ("defaults") must
// answer a hostile file with InputError or FileError naming it.
#include <fstream>

#include "engine/bundle.h"
#include "engine/settings.h"
#include "fuzz_input.h"
#include "io/atomic_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = sjd::fuzz::work_dir();
  // The files the default bundle names exist (empty), so parsing goes past the file checks.
  static const bool made = [&] {
    for (const char* name : {"model.safetensors", "model.safetensors.index.json", "tokenizer.json", "vqgan.safetensors"}) {
      std::ofstream(dir / name).put(' ');
    }
    return true;
  }();
  (void)made;
  sjd::fuzz::write_input(data, size, "bundle.json");
  try {
    const sjd::engine::Bundle bundle = sjd::engine::load_bundle(dir);
    sjd::engine::GenerationSettings settings;
    sjd::engine::apply_settings(settings, bundle.defaults, "defaults");
    sjd::engine::method_from_settings(settings);
  } catch (const sjd::engine::InputError&) {
  } catch (const sjd::io::FileError&) {
  } catch (const std::invalid_argument&) {  // settings and method checks
  }
  return 0;
}
