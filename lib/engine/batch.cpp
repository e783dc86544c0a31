#include "engine/batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "engine/batch_claims.h"
#include "engine/batch_manifest.h"
#include "engine/batch_status.h"
#include "engine/bundle.h"
#include "engine/outputs.h"
#include "io/atomic_file.h"
#include "io/prompt_file.h"
#include "text/utf8.h"

namespace sjd::engine {
namespace {

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
  prepare_output_dir(options.out_dir);
  if (const int removed = io::remove_stale_temporaries(options.out_dir); removed > 0) {
    log << "removed " << removed << " temporary file(s) left by an interrupted run\n";
  }
  const std::filesystem::path manifest = options.out_dir / manifest_name(options.shard);
  ManifestReader manifest_reader(options.out_dir, log);
  std::map<int64_t, FinishedImage> done = manifest_reader.read_new();
  const int64_t count = options.limit > 0 ? std::min<int64_t>(options.limit, static_cast<int64_t>(prompts.size()))
                                          : static_cast<int64_t>(prompts.size());
  const std::string model = generator.bundle().name;
  const auto settings_of = [&](int64_t index) {
    GenerationSettings settings = options.settings;
    settings.seed = options.settings.seed + static_cast<uint64_t>(index);
    return settings;
  };
  const auto identity_of = [&](int64_t index) {
    return image_identity(text::utf8::to_valid(prompts[static_cast<size_t>(index)].prompt), model,
                          settings_to_json(settings_of(index)));
  };
  for (const auto& [index, image] : done) {
    if (index < count) check_same_run(image, identity_of(index));
  }
  ClaimBoard claims(options.out_dir, std::chrono::seconds(options.claim_timeout_seconds));
  claims.check_live_claims(identity_of, count);
  record_batch_size(options.out_dir, options.prompts, count);  // for `sjd manifest`

  BatchSummary summary;
  const auto start = std::chrono::steady_clock::now();
  const int64_t owned = options.shard.owned_in(0, count);
  for (int64_t i = 0; i < count; ++i) {
    if (!options.shard.owns(i)) continue;
    const io::PromptEntry& entry = prompts[static_cast<size_t>(i)];
    if (done.count(i)) {
      ++summary.skipped;
      continue;
    }
    if (!claims.try_claim(i, identity_of(i))) {
      ++summary.elsewhere;  // another process is making it
      continue;
    }
    // Another process may have finished it since this run started.
    for (auto& [index, image] : manifest_reader.read_new()) {
      if (index < count) check_same_run(image, identity_of(index));
      done[index] = std::move(image);
    }
    if (done.count(i)) {
      claims.release(i);
      ++summary.skipped;
      continue;
    }
    const GenerationSettings settings = settings_of(i);
    const std::string file = batch_file_name(i, entry.prompt);
    // Invalid UTF-8 cannot go into the JSON manifest as it is: it is recorded lossily, and the prompt fails.
    const size_t bad_byte = text::utf8::find_invalid(entry.prompt);
    nlohmann::json record = {{"index", i},
                             {"prompt", text::utf8::to_valid(entry.prompt)},
                             {"line", entry.line},
                             {"seed", settings.seed},
                             {"file", file},
                             {"model", model}};
    try {
      if (bad_byte != std::string::npos) {
        throw InputError(options.prompts.string() + ":" + std::to_string(entry.line) + ": invalid UTF-8 at byte " +
                         std::to_string(bad_byte + 1));
      }
      const GenerationOutput out = generator.generate(entry.prompt, settings);
      const double write_seconds = write_image(options.out_dir / file, out, entry.prompt, model);
      record["status"] = "ok";
      record["method"] = out.method.describe();
      record["settings"] = settings_to_json(settings);
      record["steps"] = out.stats.steps;
      record["tokens"] = out.stats.tokens;
      record["step_compression"] = out.stats.step_compression();
      record["seconds"] = out.total_seconds + write_seconds;
      record_file_checksum(record, options.out_dir / file);
      ++summary.generated;
    } catch (const io::StorageError&) {
      throw;  // a full disk stops the batch (exit code 1); the claim goes with the process
    } catch (const std::exception& e) {
      record["status"] = "failed";
      record["error"] = text::utf8::to_valid(e.what());
      log << "error: prompt " << i << " (" << options.prompts.string() << ":" << entry.line << "): " << e.what()
          << "\n";
      ++summary.failed;
    }
    io::append_line(manifest, record.dump());
    claims.release(i);
    if (options.progress) {
      const int64_t finished = summary.generated + summary.failed;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // This shard's entries after this one, less those already done (the map is ordered by index).
      const int64_t left = options.shard.owned_in(i + 1, count) -
                           std::count_if(done.upper_bound(i), done.lower_bound(count),
                                         [&](const auto& entry) { return options.shard.owns(entry.first); });
      log << "\r[" << options.shard.owned_in(0, i + 1) << "/" << owned << "] " << finished << " generated, ETA "
          << format_seconds(elapsed / static_cast<double>(finished) * static_cast<double>(left)) << "   "
          << std::flush;
    }
  }
  if (options.progress) log << "\n";
  return summary;
}

}  // namespace sjd::engine
