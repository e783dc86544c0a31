#include "engine/batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "engine/batch_claims.h"
#include "engine/batch_manifest.h"
#include "engine/batch_status.h"
#include "engine/bundle.h"
#include "engine/image_writer.h"
#include "engine/outputs.h"
#include "engine/progress_line.h"
#include "engine/weights_fingerprint.h"
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

// One `sjd batch` run over a prompt file: what this shard is to make, its claims and manifest records,
// and the counts of the summary. Generator::generate_batch pulls the images to start (next) and hands
// each one back made (write_done) or failed (record_failure).
class BatchRun {
 public:
  // Checks the folder, the seeds and what earlier runs made, and resolves the batch size (part of
  // every image's settings) before any claim is taken.
  BatchRun(Generator& generator, const BatchOptions& options, std::ostream& log);
  BatchSummary run();

 private:
  GenerationSettings settings_of(int64_t index) const;
  nlohmann::json identity_of(int64_t index) const;
  nlohmann::json base_record(int64_t index) const;
  void show_progress(bool force);
  void on_step(int64_t index, const decoding::StepProgress& step);
  void finish_record(int64_t index, const nlohmann::json& record);
  bool still_ours(int64_t index);
  void record_failure(int64_t index, const std::string& error);
  std::optional<BatchItem> start_image(int64_t index);
  std::optional<BatchItem> next();
  void write_done(const BatchItem& item, GenerationOutput out);
  // After its image is on disk (or its write failed): the manifest line, the claim, the counts.
  void record_done(const BatchItem& item, const GenerationOutput& out, const nlohmann::json& checksum,
                   double write_seconds, std::exception_ptr failure);
  void count_after_stop();
  void count_done_before_us(int64_t index);

  Generator& generator_;
  const BatchOptions& options_;
  std::ostream& log_;
  const std::vector<io::PromptEntry> prompts_;
  const std::string model_;
  const std::string weights_;  // the fingerprint of the bundle's weight files (weights_fingerprint.h)
  std::filesystem::path manifest_;
  ManifestReader manifest_reader_;
  std::map<int64_t, FinishedImage> done_;  // by index: made by this run, an earlier one or another process
  std::set<int64_t> done_at_start_;          // of them, those in the manifests when this run began
  int64_t count_ = 0;                      // prompts in the run (a --limit keeps the first ones)
  int64_t owned_ = 0;                      // of them, this shard's
  BatchPlan plan_;
  nlohmann::json planning_;  // how automatic windows are planned: the same for every image
  std::unique_ptr<ClaimBoard> claims_;  // made once the checks pass: it starts a heartbeat thread
  std::unique_ptr<ImageWriter> writer_;  // PNGs are encoded and synced beside the decoding (image_writer.h)

  BatchSummary summary_;
  std::chrono::steady_clock::time_point start_;
  // One line, rewritten after every step: images done, those in flight and how far they are, an ETA that
  // counts the in-flight images' progress.
  ProgressLine progress_;
  std::map<int64_t, double> in_flight_;  // image index -> share of its tokens committed
  std::set<int64_t> failed_here_;
  // The cursor over the prompts, then one more look at the images another live process had claimed
  // when the cursor passed them.
  int64_t cursor_ = 0;
  std::vector<int64_t> held_elsewhere_;
  bool revisited_ = false;
  std::vector<int64_t> revisit_;
  size_t revisit_at_ = 0;
};

BatchRun::BatchRun(Generator& generator, const BatchOptions& options, std::ostream& log)
    : generator_(generator),
      options_(options),
      log_(log),
      prompts_(io::read_prompts(options.prompts)),
      model_(generator.bundle().name),
      weights_(weights_fingerprint(generator.bundle())),
      manifest_reader_(options.out_dir, log),
      progress_(log, options.progress, 0.25) {
  prepare_output_dir(options_.out_dir);
  if (const int removed = io::remove_stale_temporaries(options_.out_dir); removed > 0) {
    log_ << "removed " << removed << " temporary file(s) left by an interrupted run\n";
  }
  manifest_ = options_.out_dir / manifest_name(options_.shard);
  done_ = manifest_reader_.read_new();
  for (const auto& [index, image] : done_) done_at_start_.insert(index);
  count_ = options_.limit > 0 ? std::min<int64_t>(options_.limit, static_cast<int64_t>(prompts_.size()))
                              : static_cast<int64_t>(prompts_.size());
  if (count_ > 0 && options_.settings.seed > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(count_ - 1)) {
    throw InputError("--seed " + std::to_string(options_.settings.seed) + ": image i takes seed --seed + i, and " +
                     std::to_string(count_) + " prompts would pass 2^64 - 1 (image seeds would wrap to 0)");
  }
  owned_ = options_.shard.owned_in(0, count_);
  plan_.settings = options_.settings;
  // This shard's prompts less the ones already made size the KV cache; with a --batch-size given, a resumed batch
  // of a long file does not tokenise its finished prompts again (an automatic size is chosen from them all).
  for (int64_t i = 0; i < count_; ++i) {
    const std::string& prompt = prompts_[static_cast<size_t>(i)].prompt;
    if (options_.shard.owns(i) && done_.count(i) == 0) plan_.prompts.push_back(prompt);
    // An automatic batch size is chosen for every shard's prompts, made or not (BatchPlan::all_prompts).
    if (options_.settings.batch_size == kAuto) plan_.all_prompts.push_back(prompt);
  }
  plan_.settings.batch_size = generator_.resolve_batch_size(plan_);
  if (options_.settings.batch_size == kAuto) {
    log_ << "batch: batch size " << plan_.settings.batch_size
         << " (auto: 8 on a CPU, 16 on a GPU, halved until the estimate fits the memory)\n";
  }
  plan_.on_step = [this](int64_t index, const decoding::StepProgress& step) { on_step(index, step); };
  planning_ = generator_.window_planning(plan_.settings);
  for (const auto& [index, image] : done_) {
    if (index < count_) check_same_run(image, identity_of(index));
  }
  claims_ = std::make_unique<ClaimBoard>(options_.out_dir, std::chrono::seconds(options_.claim_timeout_seconds));
  claims_->check_live_claims([this](int64_t index) { return identity_of(index); }, count_);
  record_batch_size(options_.out_dir, options_.prompts, images_of_folder(options_.out_dir, count_, log_));
}

BatchSummary BatchRun::run() {
  start_ = std::chrono::steady_clock::now();
  // Up to a batch's worth of images wait for the writer; more would only hold their pixels longer.
  writer_ = std::make_unique<ImageWriter>(static_cast<size_t>(std::max<int64_t>(plan_.settings.batch_size, 1)));
  // A full disk (io::StorageError) stops the batch with exit code 1; the claims go with the process.
  try {
    generator_.generate_batch(
        plan_, [this] { return next(); },
        [this](const BatchItem& item, GenerationOutput out) { write_done(item, std::move(out)); },
        [this](const BatchItem& item, const std::string& error) { record_failure(item.id, error); });
    writer_->drain();
  } catch (...) {
    // The images already handed to the writer are recorded before the error goes on (a second error,
    // such as the same full disk, leaves the rest to the next run).
    try {
      writer_->drain();
    } catch (...) {
    }
    throw;
  }
  summary_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  summary_.batch_size = plan_.settings.batch_size;
  if (summary_.stopped_by != 0) count_after_stop();
  progress_.finish();
  return summary_;
}

GenerationSettings BatchRun::settings_of(int64_t index) const {
  GenerationSettings settings = plan_.settings;
  settings.seed = options_.settings.seed + static_cast<uint64_t>(index);
  return settings;
}

nlohmann::json BatchRun::identity_of(int64_t index) const {
  return image_identity(text::utf8::to_valid(prompts_[static_cast<size_t>(index)].prompt), {model_, weights_},
                        identity_settings(settings_of(index)), planning_);
}

nlohmann::json BatchRun::base_record(int64_t index) const {
  const io::PromptEntry& entry = prompts_[static_cast<size_t>(index)];
  nlohmann::json record{{"index", index},
                        {"line", entry.line},
                        {"seed", settings_of(index).seed},
                        {"file", batch_file_name(index, entry.prompt)}};
  record_model(record, {model_, weights_});
  record_prompt(record, entry.prompt);
  if (!planning_.is_null()) record["planning"] = planning_;
  return record;
}

void BatchRun::show_progress(bool force) {
  if (!progress_.enabled()) return;
  const int64_t finished = summary_.generated + summary_.failed;
  double partial = 0.0;
  for (const auto& [index, share] : in_flight_) partial += share;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double left = static_cast<double>(owned_ - finished - summary_.skipped - summary_.elsewhere) - partial;
  const double made = static_cast<double>(finished) + partial;
  std::ostringstream text;
  text << "[" << (finished + summary_.skipped) << "/" << owned_ << "] " << finished << " generated, "
       << in_flight_.size() << " in flight ("
       << static_cast<int>(100.0 * partial / static_cast<double>(std::max<size_t>(in_flight_.size(), 1)))
       << "% on average), ETA " << (made > 0.0 ? format_duration(elapsed / made * left) : std::string("?"));
  progress_.show(text.str(), force);
}

void BatchRun::on_step(int64_t index, const decoding::StepProgress& step) {
  writer_->collect();  // images written since the last step get their manifest lines now
  in_flight_[index] =
      static_cast<double>(step.tokens_done) / static_cast<double>(std::max<int64_t>(step.tokens_total, 1));
  show_progress(false);
}

void BatchRun::finish_record(int64_t index, const nlohmann::json& record) {
  io::append_line(manifest_, record.dump());
  claims_->release(index);
  in_flight_.erase(index);
  show_progress(true);
}

// False (and said) when the image's claim was taken over while this process was stopped past the
// claim timeout: the image is then the new owner's to record.
bool BatchRun::still_ours(int64_t index) {
  if (claims_->still_holds(index)) return true;
  log_ << "warning: prompt " << index << ": another process took this image over while this one was stopped for "
       << "longer than the claim timeout (" << options_.claim_timeout_seconds << " s, --claim-timeout); left to it\n";
  in_flight_.erase(index);
  ++summary_.elsewhere;
  return false;
}

void BatchRun::record_failure(int64_t index, const std::string& error) {
  if (!still_ours(index)) return;
  failed_here_.insert(index);
  nlohmann::json record = base_record(index);
  record["status"] = "failed";
  record["error"] = text::utf8::to_valid(error);
  log_ << "error: prompt " << index << " (" << options_.prompts.string() << ":"
       << prompts_[static_cast<size_t>(index)].line << "): " << error << "\n";
  ++summary_.failed;
  finish_record(index, record);
}

// An image found done when the cursor reached it: by an earlier run, or by another process since this one
// began (two processes starting on one empty folder counted each other's images as "already done").
void BatchRun::count_done_before_us(int64_t i) {
  ++(done_at_start_.count(i) ? summary_.skipped : summary_.elsewhere);
}

// Image i, when this process is to make it now: not done, claimed by no one else, with a usable prompt.
std::optional<BatchItem> BatchRun::start_image(int64_t i) {
  const io::PromptEntry& entry = prompts_[static_cast<size_t>(i)];
  if (done_.count(i)) {
    claims_->drop_if_stale(i);
    count_done_before_us(i);
    return std::nullopt;
  }
  if (!claims_->try_claim(i, identity_of(i))) {
    ++summary_.elsewhere;  // another process is making it
    held_elsewhere_.push_back(i);
    return std::nullopt;
  }
  // Another process may have finished it since this run started.
  for (auto& [index, image] : manifest_reader_.read_new()) {
    if (index < count_) check_same_run(image, identity_of(index));
    done_[index] = std::move(image);
  }
  if (done_.count(i)) {
    claims_->release(i);
    count_done_before_us(i);
    return std::nullopt;
  }
  // Invalid UTF-8 cannot go into the JSON manifest as it is (it is recorded lossily), nor a NUL byte
  // into the PNG's text: the prompt fails before its image is made.
  if (const std::string problem = io::prompt_text_problem(entry.prompt); !problem.empty()) {
    record_failure(i, options_.prompts.string() + ":" + std::to_string(entry.line) + ": " + problem);
    return std::nullopt;
  }
  try {
    const std::string warning = generator_.context_warning(entry.prompt, settings_of(i));
    if (!warning.empty()) {
      log_ << "warning: prompt " << i << " (" << options_.prompts.string() << ":" << entry.line << "): " << warning
           << "\n";
    }
  } catch (const std::exception&) {
    // A prompt the family cannot encode fails when its image starts, recorded in the manifest.
  }
  return BatchItem{i, entry.prompt, settings_of(i)};
}

std::optional<BatchItem> BatchRun::next() {
  writer_->collect();
  if (options_.stop_requested && (summary_.stopped_by = options_.stop_requested()) != 0) return std::nullopt;
  while (cursor_ < count_) {
    const int64_t i = cursor_++;
    if (!options_.shard.owns(i)) continue;
    if (std::optional<BatchItem> item = start_image(i)) return item;
  }
  // Once through: an owner that was killed since the cursor passed its images has left them to no one.
  // They are looked at once more (claims of a dead owner on this host are taken over at once).
  if (!revisited_) {
    revisited_ = true;
    revisit_.swap(held_elsewhere_);
  }
  while (revisit_at_ < revisit_.size()) {
    const int64_t i = revisit_[revisit_at_++];
    --summary_.elsewhere;  // counted again by start_image if it is still another's
    if (std::optional<BatchItem> item = start_image(i)) return item;
  }
  return std::nullopt;
}

void BatchRun::write_done(const BatchItem& item, GenerationOutput out) {
  if (!still_ours(item.id)) return;
  const std::filesystem::path file = options_.out_dir / batch_file_name(item.id, item.prompt);
  const auto output = std::make_shared<const GenerationOutput>(std::move(out));
  // The file's size and checksum for its manifest line, read back on the writer's thread too.
  const auto checksum = std::make_shared<nlohmann::json>();
  writer_->submit(
      [file, output, checksum, prompt = item.prompt, model = model_] {
        const double seconds = write_image(file, *output, prompt, model);
        record_file_checksum(*checksum, file);
        return seconds;
      },
      [this, item, output, checksum](double seconds, std::exception_ptr failure) {
        record_done(item, *output, *checksum, seconds, failure);
      });
}

void BatchRun::record_done(const BatchItem& item, const GenerationOutput& out, const nlohmann::json& checksum,
                           double write_seconds, std::exception_ptr failure) {
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const io::StorageError&) {
      throw;  // a full disk stops the batch (exit code 1)
    } catch (const std::exception& e) {  // e.g. a folder where the image must go: this image fails alone
      record_failure(item.id, e.what());
      return;
    }
  }
  nlohmann::json record = base_record(item.id);
  record_outcome(record, out);  // out.settings are the item's
  const nlohmann::json stats = decoding::to_json(out.stats);
  record["drafts_by_age"] = stats["windows"]["drafts_by_age"];  // what scripts/window_prior.py sums
  record["seconds"] = out.total_seconds + write_seconds;  // from its start to its file, sharing the batch's steps
  // Where that time went, as `generate` prints it; a batch's shared steps count in full for each of its images.
  nlohmann::json stages = stats["seconds"];
  stages["vq"] = out.vq_seconds;
  stages["write"] = write_seconds;
  record["seconds_by_stage"] = stages;
  record.update(checksum);  // file_bytes and file_crc32
  ++summary_.generated;
  summary_.compression_sum += out.stats.step_compression();
  summary_.method = out.method.describe();  // the same for every image
  finish_record(item.id, record);
}

// The cursor stopped early, so the counts of what it passed say nothing of the prompts after it:
// count from the manifests (this run's images, earlier runs' and other processes').
void BatchRun::count_after_stop() {
  for (auto& [index, image] : manifest_reader_.read_new()) done_[index] = std::move(image);
  int64_t done_owned = 0;
  summary_.skipped = 0;
  for (int64_t i = 0; i < count_; ++i) {
    if (!options_.shard.owns(i) || failed_here_.count(i)) continue;
    if (done_.count(i)) {
      ++done_owned;
      summary_.skipped += done_at_start_.count(i);
    } else {
      ++summary_.left;
    }
  }
  // Made by another process meanwhile; those still being made elsewhere are counted as left.
  summary_.elsewhere = done_owned - summary_.generated - summary_.skipped;
  if (summary_.left == 0) summary_.stopped_by = 0;  // the stop came when nothing was left to start
}

}  // namespace

BatchSummary run_batch(Generator& generator, const BatchOptions& options, std::ostream& log) {
  BatchRun run(generator, options, log);
  return run.run();
}

}  // namespace sjd::engine
