#include "engine/batch.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "engine/bundle.h"
#include "engine/outputs.h"
#include "io/atomic_file.h"
#include "io/prompt_file.h"

namespace sjd::engine {
namespace {

// A manifest line that records a finished image (whose file still exists).
struct FinishedImage {
  int line = 0;
  nlohmann::json record;
};

std::map<int64_t, FinishedImage> finished_images(const std::filesystem::path& manifest,
                                                 const std::filesystem::path& dir, std::ostream& log) {
  std::map<int64_t, FinishedImage> done;
  std::ifstream in(manifest);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.value("status", std::string()) == "ok" && std::filesystem::exists(dir / j.value("file", std::string()))) {
        const auto index = j.at("index").get<int64_t>();
        done[index] = {number, std::move(j)};
      }
    } catch (const nlohmann::json::exception&) {
      log << "warning: " << manifest.string() << ":" << number << ": unreadable line ignored\n";
    }
  }
  return done;
}

// What decides the picture of one batch entry: its prompt, the model and every setting
// but the device (a resumed run may move to another machine).
nlohmann::json image_identity(const std::string& prompt, const std::string& model, nlohmann::json settings) {
  settings.erase("device");
  return {{"prompt", prompt}, {"model", model}, {"settings", std::move(settings)}};
}

// The first difference between a recorded and an expected identity, as "KEY OLD (now NEW)".
std::string first_difference(const nlohmann::json& recorded, const nlohmann::json& expected) {
  const auto describe = [](const std::string& key, const nlohmann::json& old_value, const nlohmann::json& new_value) {
    return key + " " + (old_value.is_null() ? "unset" : old_value.dump()) + " (now " +
           (new_value.is_null() ? "unset" : new_value.dump()) + ")";
  };
  for (const char* key : {"prompt", "model"}) {
    if (recorded[key] != expected[key]) return describe(key, recorded[key], expected[key]);
  }
  nlohmann::json keys = expected["settings"];
  keys.update(recorded["settings"]);  // the union of both key sets
  for (const auto& [key, unused] : keys.items()) {
    const auto old_value = recorded["settings"].value(key, nlohmann::json());
    const auto new_value = expected["settings"].value(key, nlohmann::json());
    if (old_value != new_value) return describe(key, old_value, new_value);
  }
  return {};
}

// Resuming into a folder made from other prompts or settings would silently mix two runs
// (and the old images are the user's): refuse, naming the manifest line and what differs.
void check_same_run(const FinishedImage& done, const nlohmann::json& expected, const std::filesystem::path& manifest) {
  // Manifests written before the model was recorded are taken to be of this model.
  const nlohmann::json recorded =
      image_identity(done.record.value("prompt", std::string()),
                     done.record.value("model", expected["model"].get<std::string>()),
                     done.record.value("settings", nlohmann::json::object()));
  if (recorded == expected) return;
  throw InputError(manifest.string() + ":" + std::to_string(done.line) + ": image " +
                   done.record.value("file", std::string()) + " was made with " +
                   first_difference(recorded, expected) +
                   "; resume with the same prompts and settings, or use another --out-dir");
}

std::string format_seconds(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream out;
  if (s >= 3600) out << s / 3600 << "h";
  if (s >= 60) out << (s / 60) % 60 << "m";
  out << s % 60 << "s";
  return out.str();
}

}  // namespace

std::string batch_file_name(int64_t index, const std::string& prompt) {
  std::string slug;
  for (char c : prompt) {
    if (slug.size() >= 40) break;
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      slug += static_cast<char>(std::tolower(u));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  std::ostringstream name;
  name << std::setw(5) << std::setfill('0') << index << (slug.empty() ? "" : "_") << slug << ".png";
  return name.str();
}

BatchSummary run_batch(Generator& generator, const BatchOptions& options, std::ostream& log) {
  const std::vector<io::PromptEntry> prompts = io::read_prompts(options.prompts);
  std::filesystem::create_directories(options.out_dir);
  const std::filesystem::path manifest = options.out_dir / "manifest.jsonl";
  const std::map<int64_t, FinishedImage> done = finished_images(manifest, options.out_dir, log);
  const int64_t count = options.limit > 0 ? std::min<int64_t>(options.limit, static_cast<int64_t>(prompts.size()))
                                          : static_cast<int64_t>(prompts.size());
  const std::string model = generator.bundle().name;
  for (const auto& [index, image] : done) {
    if (index >= count) continue;
    GenerationSettings settings = options.settings;
    settings.seed = options.settings.seed + static_cast<uint64_t>(index);
    check_same_run(image, image_identity(prompts[static_cast<size_t>(index)].prompt, model, settings_to_json(settings)),
                   manifest);
  }
  BatchSummary summary;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < count; ++i) {
    const io::PromptEntry& entry = prompts[static_cast<size_t>(i)];
    if (done.count(i)) {
      ++summary.skipped;
      continue;
    }
    GenerationSettings settings = options.settings;
    settings.seed = options.settings.seed + static_cast<uint64_t>(i);
    const std::string file = batch_file_name(i, entry.prompt);
    nlohmann::json record = {{"index", i},           {"prompt", entry.prompt}, {"line", entry.line},
                             {"seed", settings.seed}, {"file", file},          {"model", model}};
    try {
      const GenerationOutput out = generator.generate(entry.prompt, settings);
      const double write_seconds = write_image(options.out_dir / file, out, entry.prompt, model);
      record["status"] = "ok";
      record["method"] = out.method.describe();
      record["settings"] = settings_to_json(settings);
      record["steps"] = out.stats.steps;
      record["tokens"] = out.stats.tokens;
      record["step_compression"] = out.stats.step_compression();
      record["seconds"] = out.total_seconds + write_seconds;
      ++summary.generated;
    } catch (const std::exception& e) {
      record["status"] = "failed";
      record["error"] = e.what();
      log << "error: prompt " << i << " (" << options.prompts.string() << ":" << entry.line << "): " << e.what()
          << "\n";
      ++summary.failed;
    }
    io::append_line(manifest, record.dump());
    if (options.progress) {
      const int64_t finished = summary.generated + summary.failed;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Entries after this one, less those already done (the map is ordered by index).
      const int64_t left = count - i - 1 - std::distance(done.upper_bound(i), done.lower_bound(count));
      log << "\r[" << (i + 1) << "/" << count << "] " << finished << " generated, ETA "
          << format_seconds(elapsed / static_cast<double>(finished) * static_cast<double>(left)) << "   "
          << std::flush;
    }
  }
  if (options.progress) log << "\n";
  return summary;
}

}  // namespace sjd::engine
