#pragma once
// The allowed range of every generation setting, in one place for every source
// (flags, --config files, a bundle's "defaults"). Out-of-range numbers are bad
// input: NaN or a huge guidance scale would otherwise reach the sampler as
// non-finite logits, and an unbounded window or draft tree would ask for
// gigabytes. docs/security.md lists the limits.
#include <cstdint>
#include <string>

#include "engine/settings.h"

namespace sjd::engine {

constexpr int kMaxWindow = 4096;           // draft positions per step
constexpr int64_t kMaxTreeNodes = 4096;    // sjd-pac tree nodes (pd_k + pd_k^2 + ... + pd_k^pd_depth)
constexpr int kMaxBatchSize = 1024;        // prompts decoded at once
constexpr double kMaxGuidance = 100.0;     // cfg
constexpr double kMinTemperature = 1e-3;   // below it logits / T overflow float; 0 means greedy
constexpr double kMaxTemperature = 100.0;
constexpr int64_t kMaxResolution = 16384;  // image side in pixels

// A setting's number as a user would type it: "3", "0.5", "1e-05".
std::string format_setting_number(double value);

// What is wrong with setting `key` of `settings` ("must be ... (got ...)"), or ""
// when its value is allowed ("auto" sizes included). Only called for keys a source sets.
std::string setting_problem(const GenerationSettings& settings, const std::string& key);

// What is wrong with a named setting (method, init, relax, device, dtype): the message of the parser that reads it,
// which names the value and what was meant; "" for a known name or another key. A config file's
// names are checked with it, so its errors name the file and key as its numbers' do.
std::string name_problem(const GenerationSettings& settings, const std::string& key);

// What is wrong with a negative prompt's text, or "": held to a prompt's rules (UTF-8, no NUL byte) and
// not blank; "" is allowed (the setting left unset: the family's own guidance row).
std::string negative_prompt_problem(const std::string& text);

// Nodes of an sjd-pac draft tree with `pd_k` candidates per depth over `pd_depth`
// depths, saturating at kMaxTreeNodes + 1 (so a huge request cannot overflow).
int64_t tree_node_count(int64_t pd_k, int64_t pd_depth);

// A window must fit the image: throws std::invalid_argument naming the window and
// the image's token count.
void check_window_fits(int window, int64_t image_tokens);

}  // namespace sjd::engine
