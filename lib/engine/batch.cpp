#include "engine/batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "engine/batch_claims.h"
#include "engine/batch_manifest.h"
#include "engine/batch_status.h"
#include "engine/bundle.h"
#include "engine/outputs.h"
#include "engine/progress_line.h"
#include "io/atomic_file.h"
#include "io/prompt_file.h"
#include "text/utf8.h"

namespace sjd::engine {

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

namespace {

// The image count batch.json is to record for a run of `count` prompts: a run of fewer (a --limit, or a
// shortened prompt file) keeps the larger count of an earlier run, which `sjd manifest` would otherwise
// call complete with that run's later images still missing.
int64_t images_of_folder(const std::filesystem::path& dir, int64_t count, std::ostream& log) {
  int64_t recorded = 0;
  try {
    recorded = recorded_batch_size(dir);
  } catch (const std::runtime_error&) {  // none yet, or damaged: this run's count replaces it
    return count;
  }
  if (recorded <= count) return count;
  log << "note: " << (dir / "batch.json").string() << " keeps the " << recorded << " images of an earlier run (this "
      << "run has " << count << "); `sjd manifest` counts them all (--prompts FILE counts another number)\n";
  return recorded;
}

}  // namespace

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
  if (count > 0 && options.settings.seed > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(count - 1)) {
    throw InputError("--seed " + std::to_string(options.settings.seed) + ": image i takes seed --seed + i, and " +
                     std::to_string(count) + " prompts would pass 2^64 - 1 (image seeds would wrap to 0)");
  }
  const std::string model = generator.bundle().name;
  // The batch size is resolved before anything else: it is part of every image's settings.
  BatchPlan plan;
  plan.settings = options.settings;
  for (int64_t i = 0; i < count; ++i) plan.prompts.push_back(prompts[static_cast<size_t>(i)].prompt);
  plan.pending = options.shard.owned_in(0, count);  // this shard's prompts, less the ones already made
  for (const auto& [index, image] : done) {
    if (index < count && options.shard.owns(index)) --plan.pending;
  }
  plan.settings.batch_size = generator.resolve_batch_size(plan);
  if (options.settings.batch_size == kAuto) log << "batch size " << plan.settings.batch_size << " (auto)\n";
  const auto settings_of = [&](int64_t index) {
    GenerationSettings settings = plan.settings;
    settings.seed = options.settings.seed + static_cast<uint64_t>(index);
    return settings;
  };
  const nlohmann::json planning = generator.window_planning(plan.settings);  // the same for every image
  const auto identity_of = [&](int64_t index) {
    return image_identity(text::utf8::to_valid(prompts[static_cast<size_t>(index)].prompt), model,
                          settings_to_json(settings_of(index)), planning);
  };
  for (const auto& [index, image] : done) {
    if (index < count) check_same_run(image, identity_of(index));
  }
  ClaimBoard claims(options.out_dir, std::chrono::seconds(options.claim_timeout_seconds));
  claims.check_live_claims(identity_of, count);
  record_batch_size(options.out_dir, options.prompts, images_of_folder(options.out_dir, count, log));

  BatchSummary summary;
  const auto start = std::chrono::steady_clock::now();
  const auto base_record = [&](int64_t i) {
    const io::PromptEntry& entry = prompts[static_cast<size_t>(i)];
    nlohmann::json record{{"index", i},
                          {"prompt", text::utf8::to_valid(entry.prompt)},
                          {"line", entry.line},
                          {"seed", settings_of(i).seed},
                          {"file", batch_file_name(i, entry.prompt)},
                          {"model", model}};
    if (!planning.is_null()) record["planning"] = planning;
    return record;
  };
  const int64_t owned = options.shard.owned_in(0, count);  // this shard's prompts
  // One line, rewritten after every step: images done, those in flight and how far they are, an ETA that
  // counts the in-flight images' progress.
  ProgressLine progress(log, options.progress, 0.25);
  std::map<int64_t, double> in_flight;  // image index -> share of its tokens committed
  const auto show_progress = [&](bool force) {
    if (!progress.enabled()) return;
    const int64_t finished = summary.generated + summary.failed;
    double partial = 0.0;
    for (const auto& [index, share] : in_flight) partial += share;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double left = static_cast<double>(owned - finished - summary.skipped - summary.elsewhere) - partial;
    const double made = static_cast<double>(finished) + partial;
    std::ostringstream text;
    text << "[" << (finished + summary.skipped) << "/" << owned << "] " << finished << " generated, "
         << in_flight.size() << " in flight ("
         << static_cast<int>(100.0 * partial / static_cast<double>(std::max<size_t>(in_flight.size(), 1)))
         << "% on average), ETA " << (made > 0.0 ? format_duration(elapsed / made * left) : std::string("?"));
    progress.show(text.str(), force);
  };
  plan.on_step = [&](int64_t index, const decoding::StepProgress& step) {
    in_flight[index] = static_cast<double>(step.tokens_done) / static_cast<double>(std::max<int64_t>(step.tokens_total, 1));
    show_progress(false);
  };
  const auto finish_record = [&](int64_t i, const nlohmann::json& record) {
    io::append_line(manifest, record.dump());
    claims.release(i);
    in_flight.erase(i);
    show_progress(true);
  };
  // Whether this process may still record image i: false (and said) when its claim was taken over
  // while the process was stopped past the claim timeout; the image is then the new owner's.
  const auto still_ours = [&](int64_t i) {
    if (claims.still_holds(i)) return true;
    log << "warning: prompt " << i << ": another process took this image over while this one was stopped for longer "
        << "than the claim timeout (" << options.claim_timeout_seconds << " s, --claim-timeout); left to it\n";
    in_flight.erase(i);
    ++summary.elsewhere;
    return false;
  };
  std::set<int64_t> failed_here;
  const auto record_failure = [&](int64_t i, const std::string& error) {
    if (!still_ours(i)) return;
    failed_here.insert(i);
    nlohmann::json record = base_record(i);
    record["status"] = "failed";
    record["error"] = text::utf8::to_valid(error);
    log << "error: prompt " << i << " (" << options.prompts.string() << ":" << prompts[static_cast<size_t>(i)].line
        << "): " << error << "\n";
    ++summary.failed;
    finish_record(i, record);
  };

  // Image i, when this process is to make it now: not done, claimed by no one else, with a usable prompt.
  std::vector<int64_t> held_elsewhere;  // images another live process had claimed when the cursor passed
  const auto start_image = [&](int64_t i) -> std::optional<BatchItem> {
    const io::PromptEntry& entry = prompts[static_cast<size_t>(i)];
    if (done.count(i)) {
      claims.drop_if_stale(i);
      ++summary.skipped;
      return std::nullopt;
    }
    if (!claims.try_claim(i, identity_of(i))) {
      ++summary.elsewhere;  // another process is making it
      held_elsewhere.push_back(i);
      return std::nullopt;
    }
    // Another process may have finished it since this run started.
    for (auto& [index, image] : manifest_reader.read_new()) {
      if (index < count) check_same_run(image, identity_of(index));
      done[index] = std::move(image);
    }
    if (done.count(i)) {
      claims.release(i);
      ++summary.skipped;
      return std::nullopt;
    }
    // Invalid UTF-8 cannot go into the JSON manifest as it is (it is recorded lossily), nor a NUL byte
    // into the PNG's text: the prompt fails before its image is made.
    if (const std::string problem = io::prompt_text_problem(entry.prompt); !problem.empty()) {
      record_failure(i, options.prompts.string() + ":" + std::to_string(entry.line) + ": " + problem);
      return std::nullopt;
    }
    try {
      const std::string warning = generator.context_warning(entry.prompt, settings_of(i));
      if (!warning.empty()) {
        log << "warning: prompt " << i << " (" << options.prompts.string() << ":" << entry.line << "): " << warning
            << "\n";
      }
    } catch (const std::exception&) {
      // A prompt the family cannot encode fails when its image starts, recorded in the manifest.
    }
    return BatchItem{i, entry.prompt, settings_of(i)};
  };
  int64_t cursor = 0;
  bool revisited = false;
  std::vector<int64_t> revisit;
  size_t revisit_at = 0;
  const auto next = [&]() -> std::optional<BatchItem> {
    if (options.stop_requested && (summary.stopped_by = options.stop_requested()) != 0) return std::nullopt;
    while (cursor < count) {
      const int64_t i = cursor++;
      if (!options.shard.owns(i)) continue;
      if (std::optional<BatchItem> item = start_image(i)) return item;
    }
    // Once through: an owner that was killed since the cursor passed its images has left them to no one.
    // They are looked at once more (claims of a dead owner on this host are taken over at once).
    if (!revisited) {
      revisited = true;
      revisit.swap(held_elsewhere);
    }
    while (revisit_at < revisit.size()) {
      const int64_t i = revisit[revisit_at++];
      --summary.elsewhere;  // counted again by start_image if it is still another's
      if (std::optional<BatchItem> item = start_image(i)) return item;
    }
    return std::nullopt;
  };
  const auto write_done = [&](const BatchItem& item, GenerationOutput out) {
    if (!still_ours(item.id)) return;
    nlohmann::json record = base_record(item.id);
    const std::filesystem::path file = options.out_dir / record["file"].get<std::string>();
    double write_seconds = 0.0;
    try {
      write_seconds = write_image(file, out, item.prompt, model);
    } catch (const io::StorageError&) {
      throw;  // a full disk stops the batch (exit code 1)
    } catch (const std::exception& e) {  // e.g. a folder where the image must go: this image fails alone
      record_failure(item.id, e.what());
      return;
    }
    record["status"] = "ok";
    record["method"] = out.method.describe();
    record["exactness"] = decoding::exactness_name(out.method.exactness());  // as stats and compare's runs have it
    record["settings"] = settings_to_json(item.settings);
    record["steps"] = out.stats.steps;
    record["tokens"] = out.stats.tokens;
    record["step_compression"] = out.stats.step_compression();
    const nlohmann::json stats = decoding::to_json(out.stats);
    record["drafts_by_age"] = stats["windows"]["drafts_by_age"];  // what scripts/window_prior.py sums
    record["seconds"] = out.total_seconds + write_seconds;  // from its start to its file, sharing the batch's steps
    // Where that time went, as `generate` prints it; a batch's shared steps count in full for each of its images.
    nlohmann::json stages = stats["seconds"];
    stages["vq"] = out.vq_seconds;
    stages["write"] = write_seconds;
    record["seconds_by_stage"] = stages;
    record_file_checksum(record, file);
    ++summary.generated;
    summary.compression_sum += out.stats.step_compression();
    summary.method = out.method.describe();  // the same for every image
    finish_record(item.id, record);
  };
  // A full disk (io::StorageError) stops the batch with exit code 1; the claims go with the process.
  generator.generate_batch(plan, next, write_done,
                           [&](const BatchItem& item, const std::string& error) { record_failure(item.id, error); });
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.batch_size = plan.settings.batch_size;
  if (summary.stopped_by != 0) {
    // The cursor stopped early, so the counts of what it passed say nothing of the prompts after it:
    // count from the manifests (this run's images, earlier runs' and other processes').
    for (auto& [index, image] : manifest_reader.read_new()) done[index] = std::move(image);
    int64_t done_owned = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (!options.shard.owns(i) || failed_here.count(i)) continue;
      if (done.count(i)) {
        ++done_owned;
      } else {
        ++summary.left;
      }
    }
    summary.skipped = done_owned - summary.generated;  // made before this run, or by another process meanwhile
    summary.elsewhere = 0;  // those still being made elsewhere are counted as left
    if (summary.left == 0) summary.stopped_by = 0;  // the stop came when nothing was left to start
  }
  progress.finish();
  return summary;
}

}  // namespace sjd::engine
