#pragma once
// What a generation leaves on disk: the PNG (prompt, seed, method and settings
// in its text chunks), the stats JSON, the committed-at-step heatmap.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "engine/generator.h"

namespace sjd::engine {

// Creates an output folder (and its parents); a path that exists and is not a
// folder, or one that cannot be created, is bad input naming it.
void prepare_output_dir(const std::filesystem::path& dir);

// Writes the image atomically; returns the seconds it took.
double write_image(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                   const std::string& model_name);

// Steps, tokens, step compression, accepted-length histogram and the latency
// breakdown (prefill, forward, pipeline, verify, vq, write) of one generation.
nlohmann::json stats_json(const GenerationOutput& out, double write_seconds);

// Step index that committed each image cell, over the grid, as a PNG
// (dark = early, bright = late), each cell drawn `cell` pixels wide.
void write_step_heatmap(const std::filesystem::path& file, const GenerationOutput& out,
                        const family::TokenLayout& layout, int64_t cell = 8);

}  // namespace sjd::engine
