#pragma once
// What a generation leaves on disk: the PNG (prompt, seed, method and settings
// in its text chunks) and the stats JSON (the heatmap: step_heatmap.h).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/generator.h"
#include "io/atomic_file.h"

namespace sjd::engine {

// Creates an output folder (and its parents), recorded for removal if the command fails or is
// ended by a signal (engine/created_folders.h); a path that exists and is not a folder, or one
// that cannot be created, is bad input naming it.
void prepare_output_dir(const std::filesystem::path& dir);

// Which command's folder a --out-dir is: batch (manifest.jsonl and PNGs at the top, batch.json) and
// compare (compare.json, runs/) each refuse the other's, and a compare's runs/ folder is not a batch's
// (nor the reverse), so two runs' files are never mixed. Checked before the model loads; InputError
// naming the folder.
enum class RunFolder { kBatch, kCompare };
void check_run_folder(const std::filesystem::path& dir, RunFolder wanted);
// Whether `dir` holds a run of that kind (the files above).
bool holds_run(const std::filesystem::path& dir, RunFolder kind);

// An output file named by flag `flag` ("-o"), checked before any work: its
// folder is created (as batch creates --out-dir), it must be a file sjd may
// replace (io::check_output_path) and not an existing file of a model bundle (a
// folder with a bundle.json), and, when `extension` is given (".png"), its
// name must end with it (case ignored) -- sjd writes no other format.
void prepare_output_file(const std::filesystem::path& file, const std::string& flag,
                         const std::string& extension = "");

// Refuses an output that would replace another output or something the run reads, before any work:
// two flags naming one file (-o x.png --stats x.png would leave only the stats); an output naming an
// input file (--stats c.json --config c.json replaced the config); an output naming a file that exists
// in the model bundle's folder (--stats m/model.safetensors replaced the weights and exited 0). Paths
// are compared resolved, however they are written. InputError naming the flags. Each entry is (flag,
// path); empty paths are flags not given, and an empty model_dir is no bundle.
using NamedPaths = std::vector<std::pair<std::string, std::filesystem::path>>;
void check_outputs_apart(const NamedPaths& outputs, const NamedPaths& inputs = {},
                         const std::filesystem::path& model_dir = {});
// A run's --out-dir (batch, compare) must be neither the model bundle's folder nor inside it, the files
// the run keeps at its top (`kept`: "manifest.jsonl", "compare.json", ...) must not be its inputs, and no
// input may be a PNG in `images`, the folder its images go to (their names come from the prompts).
void check_run_folder_apart(const std::filesystem::path& dir, const std::vector<std::string>& kept,
                            const std::filesystem::path& images, const NamedPaths& inputs,
                            const std::filesystem::path& model_dir);

// Writes the image atomically; returns the seconds it took.
double write_image(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                   const std::string& model_name);
// The image encoded and written to a temporary file beside `file`, which file->commit() puts in its place
// (destroyed uncommitted, it is removed): generate writes its other outputs in between, so that one that
// fails leaves the image that was there. `seconds` encoding, writing and flushing took (the commit then renames).
struct StagedImage {
  std::unique_ptr<io::AtomicFileWriter> file;
  double seconds = 0.0;
};
StagedImage stage_image(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                        const std::string& model_name);

// The fields of a finished image's manifest line that batch and compare both record, from its
// output: status "ok", the method and its exactness, the resolved settings, steps, tokens and step
// compression.
void record_outcome(nlohmann::json& record, const GenerationOutput& out);

// What a stats file records besides the run itself: what was asked and where the image went.
struct RunContext {
  std::string prompt;
  std::string model_name;              // the bundle's name
  std::filesystem::path model_dir;     // the bundle's folder
  std::filesystem::path image;         // the PNG written
};

// Steps, tokens, step compression, accepted-length histogram and the latency
// breakdown (prefill, forward, pipeline, verify, vq, write) of one generation;
// its method, exactness (exact | greedy | lossy) and resolved settings; the
// prompt, the model (name and absolute path) and the image's absolute path.
nlohmann::json stats_json(const GenerationOutput& out, double write_seconds, const RunContext& context);

}  // namespace sjd::engine
