#pragma once
// `generate --heatmap`: the step that committed each image token, as a picture
// a person can read -- the map (dark blue = early, yellow = late) with a colour
// bar numbered in steps, under the method and its exactness label, next to the generated image (`side`, the default),
// blended over it (`blend`), or alone (`map`).
#include <filesystem>
#include <string>

#include "engine/generator.h"
#include "family/token_layout.h"
#include "io/canvas.h"
#include "io/text_renderer.h"

namespace sjd::engine {

enum class HeatmapView { kSide, kBlend, kMap };

// "side" | "blend" | "map"; anything else is an InputError naming the choices.
HeatmapView parse_heatmap_view(const std::string& name);

// Step index that committed each image cell: float [grid_h, grid_w].
at::Tensor committed_step_map(const GenerationOutput& out, const family::TokenLayout& layout);

// The colour of a step at `level` in [0, 1] (0 = the first step, 1 = the last).
io::Rgb step_colour(float level);

// The heatmap picture, uint8 [H, W, 3].
at::Tensor draw_step_heatmap(const GenerationOutput& out, const family::TokenLayout& layout, HeatmapView view,
                             const io::TextRenderer& text);

// The heatmap as a PNG whose text chunks, like the image's, carry its prompt, seed, method and exactness.
void write_step_heatmap(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                        const family::TokenLayout& layout, HeatmapView view, const io::TextRenderer& text);

}  // namespace sjd::engine
