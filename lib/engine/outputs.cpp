#include "engine/outputs.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>

#include "decoding/run_stats.h"
#include "engine/bundle.h"
#include "engine/created_folders.h"
#include "io/atomic_file.h"
#include "io/input_files.h"
#include "io/png_writer.h"
#include "text/utf8.h"

namespace sjd::engine {

namespace {

// The refusal of an output that would replace a file of a model bundle, whichever check finds it.
InputError bundle_file_error(const std::string& flag, const std::filesystem::path& file,
                             const std::filesystem::path& bundle) {
  return InputError(flag + " names " + file.string() + ", a file of the model bundle " + bundle.string() +
                    ": sjd never replaces a bundle's files; give another path");
}

// The folders that making `dir` creates, as the kernel resolves them (weakly_canonical:
// "link/../out" is the out beside the link's target). Each of the path's own prefixes is looked at, not
// only the resolved folder's parents: `-o ghost/../x.png` makes ghost/ though the folder it names exists.
std::vector<std::filesystem::path> missing_folders(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> missing;
  std::error_code error;
  const std::filesystem::path whole = std::filesystem::absolute(dir, error);
  if (error) return missing;
  std::filesystem::path prefix;
  for (const auto& part : whole) {
    prefix /= part;
    if (std::filesystem::exists(std::filesystem::symlink_status(prefix, error))) continue;
    std::filesystem::path folder = std::filesystem::weakly_canonical(prefix, error);
    if (error) continue;
    if (!folder.has_filename()) folder = folder.parent_path();  // "out/" names the folder "out"
    if (std::filesystem::exists(std::filesystem::symlink_status(folder, error))) continue;
    if (std::find(missing.begin(), missing.end(), folder) == missing.end()) missing.push_back(folder);
  }
  return missing;
}

}  // namespace

void prepare_output_dir(const std::filesystem::path& dir) {
  std::error_code error;
  const auto status = std::filesystem::status(dir, error);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) {
    throw InputError(dir.string() + ": the output folder exists and is not a folder");
  }
  const std::vector<std::filesystem::path> missing = missing_folders(dir);
  const SigintSigtermHeld held;  // a Ctrl-C before the folders are recorded would leave them behind
  std::filesystem::create_directories(dir, error);
  if (error) throw InputError(dir.string() + ": cannot create the output folder: " + error.message());
  try {
    io::check_folder_writable(dir);
  } catch (...) {
    record_created_folders(missing);
    throw;
  }
  record_created_folders(missing);
}

namespace {

// Whether a manifest's first line is compare's: its runs carry their --methods entry and prompt index.
bool holds_compare_lines(const std::filesystem::path& manifest) {
  std::error_code error;  // a link, FIFO or folder there is refused later, naming it: a FIFO must not be opened
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(manifest, error))) return false;
  std::ifstream in(manifest, std::ios::binary);
  std::string head(size_t{1} << 20, '\0');  // a first line past 1 MiB is no manifest line of sjd's
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  head.resize(std::min(head.find('\n'), head.size()));
  const nlohmann::json first = nlohmann::json::parse(head, nullptr, /*allow_exceptions=*/false);
  return first.is_object() && first.contains("entry") && first.contains("prompt_index");
}

}  // namespace

bool holds_run(const std::filesystem::path& dir, RunFolder kind) {
  const auto has = [&](const std::filesystem::path& name) {
    std::error_code error;  // an unreadable folder is prepare_output_dir's to report
    return std::filesystem::exists(dir / name, error);
  };
  return kind == RunFolder::kCompare ? has("compare.json") || has(std::filesystem::path("runs") / "manifest.jsonl")
                                     : has("batch.json") || has("manifest.jsonl");
}

void check_run_folder(const std::filesystem::path& dir, RunFolder wanted) {
  std::error_code error;  // an unreadable folder is prepare_output_dir's to report
  if (wanted == RunFolder::kBatch) {
    if (holds_run(dir, RunFolder::kCompare)) {
      throw InputError(dir.string() + " holds a compare run (compare.json, runs/): give batch its own --out-dir");
    }
    // A compare's runs/ folder has a manifest.jsonl and PNGs like a batch's: a batch there took compare's
    // images for its own and wrote its lines into compare's manifest. compare.json beside it is written at the
    // compare's end, so a compare still running is told by its manifest's lines.
    const std::filesystem::path folder = std::filesystem::weakly_canonical(std::filesystem::absolute(dir), error);
    const bool beside_table = !error && folder.filename() == "runs" &&
                              std::filesystem::exists(folder.parent_path() / "compare.json", error);
    if (beside_table || holds_compare_lines(dir / "manifest.jsonl")) {
      throw InputError(dir.string() + " is the runs/ folder of a compare run: give batch its own --out-dir");
    }
  }
  if (wanted == RunFolder::kCompare) {
    if (holds_run(dir, RunFolder::kBatch)) {
      throw InputError(dir.string() +
                       " holds a batch run (manifest.jsonl, batch.json): give compare its own --out-dir");
    }
    if (std::filesystem::exists(dir / "runs" / "batch.json", error)) {
      throw InputError((dir / "runs").string() + " holds a batch run (batch.json), where compare keeps its runs: " +
                       "give compare its own --out-dir");
    }
  }
}

void prepare_output_file(const std::filesystem::path& file, const std::string& flag, const std::string& extension) {
  std::error_code error;
  // An existing symlink, FIFO or device (-o /dev/null) is named as what it is, before its name is judged.
  const auto type = std::filesystem::symlink_status(file, error).type();
  if (type != std::filesystem::file_type::not_found && type != std::filesystem::file_type::none) {
    io::check_output_path(file);
  }
  // Whatever model the run reads: a bundle's own files are never replaced (bench --json bundle.json did,
  // with exit code 0). A folder with a bundle.json is a bundle (engine/bundle.h).
  const std::filesystem::path folder = std::filesystem::absolute(file, error).parent_path();
  if (std::filesystem::is_regular_file(file, error) && std::filesystem::exists(folder / "bundle.json", error)) {
    throw bundle_file_error(flag, file, folder);
  }
  if (!extension.empty()) {
    std::string given = file.extension().string();
    std::transform(given.begin(), given.end(), given.begin(), [](unsigned char c) { return std::tolower(c); });
    if (given != extension) {
      throw InputError(flag + " " + file.string() + ": sjd writes " + extension + " files only" +
                       (given.empty() ? std::string(" (the name has no extension)")
                                      : " (got '" + file.extension().string() + "')"));
    }
  }
  try {
    if (file.has_parent_path()) {
      prepare_output_dir(file.parent_path());
    } else {
      io::check_folder_writable(".");
    }
  } catch (const std::runtime_error& e) {  // InputError or io::FileError
    throw InputError(flag + " " + file.string() + ": " + e.what());
  }
  io::check_output_path(file);
}

namespace {

std::filesystem::path resolved_path(const std::filesystem::path& file) {
  std::error_code error;
  // Absolute first: weakly_canonical leaves a relative path whose first part does not exist as it is,
  // so "c.png" and "./c.png" would not meet.
  std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(file), error);
  if (error) resolved = std::filesystem::absolute(file).lexically_normal();
  return resolved;
}

bool inside(const std::filesystem::path& file, const std::filesystem::path& dir) {
  const auto [dir_end, file_at] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  return dir_end == dir.end() && file_at != file.end();
}

}  // namespace

void check_outputs_apart(const NamedPaths& outputs, const NamedPaths& inputs, const std::filesystem::path& model_dir) {
  NamedPaths resolved_inputs;
  for (const auto& [flag, file] : inputs) {
    if (!file.empty()) resolved_inputs.emplace_back(flag, resolved_path(file));
  }
  const std::filesystem::path bundle = model_dir.empty() ? model_dir : resolved_path(model_dir);
  NamedPaths seen;
  for (const auto& [flag, file] : outputs) {
    if (file.empty()) continue;
    const std::filesystem::path resolved = resolved_path(file);
    for (const auto& [other_flag, other] : seen) {
      if (other == resolved) {
        throw InputError(other_flag + " and " + flag + " name the same file, " + file.string() +
                         ": each output needs a path of its own");
      }
    }
    for (const auto& [input_flag, input] : resolved_inputs) {
      if (input == resolved) {
        throw InputError(flag + " names " + file.string() + ", the file " + input_flag +
                         " reads: an output must not replace the run's input");
      }
    }
    std::error_code error;
    if (!bundle.empty() && inside(resolved, bundle) && std::filesystem::exists(resolved, error)) {
      throw bundle_file_error(flag, file, model_dir);
    }
    seen.emplace_back(flag, resolved);
  }
}

void check_run_folder_apart(const std::filesystem::path& dir, const std::vector<std::string>& kept,
                            const std::filesystem::path& images, const NamedPaths& inputs,
                            const std::filesystem::path& model_dir) {
  const std::filesystem::path resolved = resolved_path(dir);
  // An image's name comes from its prompt, so any PNG in the images' folder may be one the run writes.
  const std::filesystem::path image_folder = resolved_path(images);
  for (const auto& [flag, file] : inputs) {
    const std::filesystem::path input = file.empty() ? file : resolved_path(file);  // a link: where it points
    if (input.extension() == ".png" && input.parent_path() == image_folder) {
      throw InputError(flag + " names " + file.string() + ", a PNG in " + images.string() +
                       ", where the run writes its images: one of them could replace it; move it or give another " +
                       "--out-dir");
    }
  }
  const std::filesystem::path bundle = resolved_path(model_dir);
  if (resolved == bundle || inside(resolved, bundle)) {
    throw InputError("--out-dir " + dir.string() + " is in the model bundle's folder " + model_dir.string() +
                     ": a run's images and records go in a folder of their own");
  }
  NamedPaths outputs;
  for (const std::string& name : kept) outputs.emplace_back("--out-dir's " + name, dir / name);
  check_outputs_apart(outputs, inputs);
}

StagedImage stage_image(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                        const std::string& model_name) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, std::string>> text = {{"prompt", prompt},
                                                            {"seed", std::to_string(out.settings.seed)},
                                                            {"method", out.method.describe()},
                                                            {"model", model_name},
                                                            {"settings", settings_to_json(out.settings).dump()}};
  // Only automatic windows read a step-cost profile (RunStats::cost_profile is empty otherwise).
  if (!out.stats.cost_profile.empty()) text.emplace_back("cost_profile", out.stats.cost_profile);
  text.emplace_back("Software", "sjd");
  StagedImage staged{std::make_unique<io::AtomicFileWriter>(file), 0.0};
  staged.file->write(io::encode_png(file, out.image, text));
  staged.file->flush();  // on disk: what is timed is the whole write but the rename, as for a batch's images
  staged.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return staged;
}

double write_image(const std::filesystem::path& file, const GenerationOutput& out, const std::string& prompt,
                   const std::string& model_name) {
  StagedImage staged = stage_image(file, out, prompt, model_name);
  const auto start = std::chrono::steady_clock::now();
  staged.file->commit();
  return staged.seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void record_outcome(nlohmann::json& record, const GenerationOutput& out) {
  record["status"] = "ok";
  record["method"] = out.method.describe();
  record["exactness"] = decoding::exactness_name(out.method.exactness());  // as stats files have it
  record["settings"] = settings_to_json(out.settings);
  record["steps"] = out.stats.steps;
  record["tokens"] = out.stats.tokens;
  record["step_compression"] = out.stats.step_compression();
}

nlohmann::json stats_json(const GenerationOutput& out, double write_seconds, const RunContext& context) {
  nlohmann::json j = decoding::to_json(out.stats);
  j["prompt"] = text::utf8::to_valid(context.prompt);  // JSON holds text only
  j["model"] = {{"name", context.model_name},
                {"path", std::filesystem::absolute(context.model_dir).lexically_normal().string()}};
  j["image"] = std::filesystem::absolute(context.image).lexically_normal().string();
  j["method"] = out.method.describe();
  j["exactness"] = decoding::exactness_name(out.method.exactness());
  j["lossless"] = out.method.lossless();  // kept for readers of older stats: exactness != "lossy"
  j["seconds"]["vq"] = out.vq_seconds;
  j["seconds"]["write"] = write_seconds;
  j["seconds"]["total"] = out.total_seconds + write_seconds;
  j["settings"] = settings_to_json(out.settings);
  return j;
}

}  // namespace sjd::engine
