// A batch manifest.jsonl: damaged lines are skipped with a warning; a record is
// trusted only with valid fields, and comparing it with a run never throws
// anything but InputError.
#include <sstream>

#include "engine/batch_manifest.h"
#include "engine/bundle.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sjd::fuzz::write_input(data, size, "manifest.jsonl");
  std::ostringstream log;
  sjd::engine::ManifestReader reader(sjd::fuzz::work_dir(), log);
  const nlohmann::json expected = sjd::engine::image_identity("a red apple", "m", {{"seed", 1}, {"cfg", 2.0}});
  for (const auto& [index, image] : reader.read_new()) {
    if (index < 0) __builtin_trap();
    try {
      sjd::engine::check_same_run(image, expected);
    } catch (const sjd::engine::InputError&) {
    }
  }
  return 0;
}
