#pragma once
// Generation settings and how they resolve:
//   built-in defaults < bundle "defaults" < --config file.json < command-line flags.
// Every JSON layer uses the same flat keys (the names of the long flags with
// '-' written as '_'); an unknown key is an error naming the file and key path.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "decoding/method.h"
#include "io/prompt_file.h"
#include "sampling/logits_pipeline.h"

namespace sjd::engine {

// `window`, `pd_k` and `pd_depth` take a number or "auto" (kAuto): chosen before
// each step from the step-cost profile (decoding/window_planner.h).
constexpr int kAuto = -1;

struct GenerationSettings {
  std::string method = "ar";
  int window = kAuto;          // draft positions per step, or kAuto
  std::string init = "random";
  int pd_k = kAuto;            // sjd-pac tree: candidates per level, or kAuto
  int pd_depth = kAuto;        // sjd-pac tree: levels, or kAuto
  std::string relax = "none";
  // The relaxations' defaults make each of them take fewer steps than its lossless base on
  // the default model, with automatic and with 64-token windows (docs/benchmarks.md,
  // "Relaxation defaults"; scripts/sweep_relaxation.py).
  double delta = 2.0;
  double nu = 0.05;
  int lantern_k = 10;
  double lantern_lambda = 4.0;
  bool lantern_own_residual = false;
  double cfg = 3.0;
  // The text of the guidance row ("": the family's own row: Lumina-mGPT's and LlamaGen's unconditional
  // ones, Emu3's bundle negative prompt). Read only when cfg mixes.
  std::string negative_prompt;
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t resolution = 0;      // image side in pixels; 0 = the bundle's own
  std::string device = "cpu";  // cpu | cuda (engine/device.h checks it)
  std::string dtype = "f32";   // f32 | bf16: the transformer's weights and KV cache
  std::string cost_profile;    // step-cost profile file for automatic windows ("": the bundle's for the device)
  // Prompts decoded at once by batch and compare (kAuto: chosen from the device and
  // memory; generate: 1). Automatic windows are planned for a step of this many
  // sequences, so with them the image depends on it (generate --batch-size B
  // reproduces an image of a batch-B run); fixed windows do not.
  int batch_size = kAuto;
};

// Overlays the keys of `layer` onto `settings`; `where` names the source in
// errors ("configs/x.json", "models/m/bundle.json: defaults"). An unknown key's
// error suggests the closest known one.
void apply_settings(GenerationSettings& settings, const nlohmann::json& layer, const std::string& where);

// The keys of a settings layer (a config file, a bundle's defaults), as the long flags with '_' for '-'.
const std::vector<std::string>& setting_keys();

// A warning when .jsonl prompt records carry settings ({"prompt": ..., "seed": 7}), which sjd does not read
// from a prompt file, naming the first such line and how many there are; "" when none do.
std::string prompt_file_settings_warning(const std::vector<io::PromptEntry>& prompts, const std::string& file);

nlohmann::json settings_to_json(const GenerationSettings& settings);

// "auto" -> kAuto, else an integer >= `least`; `what` names the flag or key in errors.
int parse_count_or_auto(const std::string& text, int least, const std::string& what);

// A method may be written "name:relaxation" everywhere ("sjd-pac:lantern", as
// `compare --methods` takes it): the suffix moves into `relax`, and a name
// without one sets `relax` to none, so a method given later (a flag after a
// config file) never inherits an earlier one's relaxation. A relax key of the
// same layer, or a --relax flag, applied after it overrides it.
void split_method_entry(GenerationSettings& settings);

// A note line per setting the method ignores ("" when none): jacobi decodes greedily, so a
// temperature other than the default has no effect; ar takes no window; only sjd-pac takes a tree.
// `baseline` is what the user did not choose (the built-in and the bundle's defaults): a value equal
// to it is no one's choice and gets no note (the default model's temperature 0.8 under jacobi).
std::string ignored_settings_note(const GenerationSettings& settings, const GenerationSettings& baseline = {});

// The keys whose values cannot change an image made with `settings`: those its method does not read (ar's
// window and init, pd_k and pd_depth outside sjd-pac, jacobi's temperature, the parameters of relaxations not
// in use: what ignored_settings_note names when the user set them) and, without automatic windows, the two that
// only the window planner reads (batch_size, which the note leaves alone as it still sets the speed, and
// cost_profile), and negative_prompt where cfg does not mix. An unknown method: none.
std::vector<std::string> keys_without_effect(const GenerationSettings& settings);

// The settings that make an image, as an image's identity records them (batch_manifest.h): settings_to_json
// without keys_without_effect, without the device (a resumed run may move to another machine) and without the
// step-cost profile's path (with automatic windows the identity's planning names the profile by its content).
// A batch or compare resumed with another value of a setting that cannot change its images is the same run.
nlohmann::json identity_settings(const GenerationSettings& settings);

// The method pieces the settings select; throws std::invalid_argument for bad values.
decoding::MethodConfig method_from_settings(const GenerationSettings& settings);

sampling::PipelineSettings pipeline_from_settings(const GenerationSettings& settings, sampling::CfgMix mix,
                                                  bool greedy);

}  // namespace sjd::engine
