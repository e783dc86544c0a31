#include "engine/compare.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "engine/batch_manifest.h"
#include "engine/bundle.h"
#include "engine/outputs.h"
#include "engine/progress_line.h"
#include "engine/weights_fingerprint.h"
#include "engine/window_prior.h"
#include "io/atomic_file.h"
#include "io/png_reader.h"
#include "text/utf8.h"

namespace sjd::engine {
namespace {

// "00007_sjd-pac-cool_seed3.png": the run's index, method entry and seed.
std::string run_file_name(int64_t index, const std::string& entry, uint64_t seed) {
  std::string slug;
  for (const char c : entry) slug += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '-';
  std::ostringstream name;
  name << std::setw(5) << std::setfill('0') << index << "_" << slug << "_seed" << seed << ".png";
  return name.str();
}

// The runs/manifest.jsonl line of a finished run: what the report needs to be rebuilt on resume.
nlohmann::json run_record(int64_t index, const CompareRun& run, const std::string& prompt, const ModelIdentity& model,
                          const std::string& entry, const GenerationOutput& out, const std::string& file,
                          double seconds) {
  const decoding::RunStats& st = out.stats;
  nlohmann::json record = {
      {"index", index},
      {"file", file},
      {"prompt", text::utf8::to_valid(prompt)},
      {"prompt_index", run.prompt},
      {"entry", entry},
      {"seed", out.settings.seed},
      {"seconds", seconds},
      {"decode_seconds", st.prefill_seconds + st.forward_seconds + st.pipeline_seconds + st.verify_seconds},
      {"chain_sum", st.mean_chain() * static_cast<double>(st.steps)},
      {"tree_windows", st.tree_windows},
      {"tree_k_sum", st.tree_k_sum},
      {"tree_depth_sum", st.tree_depth_sum},
      {"accepted_histogram", st.accepted_histogram}};
  record_model(record, model);
  record_outcome(record, out);
  return record;
}

// What is wrong with a finished run's line for the report, "" when it can be used
// (batch_manifest.cpp has checked index, status, file, prompt, model and settings).
std::string run_record_problem(const nlohmann::json& j) {
  for (const char* key : {"steps", "tokens", "tree_windows", "tree_k_sum", "tree_depth_sum"}) {
    if (!j.contains(key) || !j[key].is_number_unsigned()) return std::string("\"") + key + "\" is not a count";
  }
  for (const char* key : {"step_compression", "seconds", "decode_seconds", "chain_sum"}) {
    if (!j.contains(key) || !j[key].is_number() || j[key].get<double>() < 0.0) {
      return std::string("\"") + key + "\" is not a non-negative number";
    }
  }
  for (const char* key : {"method", "exactness", "entry"}) {
    if (!j.contains(key) || !j[key].is_string()) return std::string("\"") + key + "\" is not a string";
  }
  const auto& histogram = j.contains("accepted_histogram") ? j["accepted_histogram"] : nlohmann::json();
  if (!histogram.is_array() || histogram.size() > j["tokens"].get<uint64_t>() + 1) {
    return "\"accepted_histogram\" is not a list of at most tokens + 1 counts";
  }
  for (const auto& count : histogram) {
    if (!count.is_number_unsigned()) return "\"accepted_histogram\" holds a value that is not a count";
  }
  return {};
}

// What pairs a recorded run with a run of this command: its prompt, method entry and seed. A recorded run with
// the key of a run here must be that run (one made with other settings or another bundle is refused); one with no
// such run (a method, seed or prompt this command does not list) is kept in the folder and left out of the report.
std::string run_key(const std::string& prompt, const nlohmann::json& settings) {
  const auto field = [&](const char* key) {
    return settings.is_object() && settings.contains(key) ? settings[key] : nlohmann::json();
  };
  return nlohmann::json::array({prompt, field("method"), field("relax"), field("seed")}).dump();
}

// A row per method from its runs' records.
CompareRow summarise(const std::string& entry, const std::vector<const CompareRun*>& runs) {
  CompareRow row;
  row.entry = entry;
  int64_t tokens = 0, steps = 0, tree_windows = 0, k_sum = 0, depth_sum = 0;
  double chain_sum = 0.0;
  std::vector<int64_t> histogram;
  for (const CompareRun* run : runs) {
    const nlohmann::json& r = run->record;
    row.method = r["method"].get<std::string>();
    row.exactness = r["exactness"].get<std::string>();
    row.lossless = row.exactness != "lossy";
    ++row.runs;
    tokens += r["tokens"].get<int64_t>();
    steps += r["steps"].get<int64_t>();
    const double seconds = r["seconds"].get<double>();
    row.seconds_min = row.runs == 1 ? seconds : std::min(row.seconds_min, seconds);
    row.seconds_max = std::max(row.seconds_max, seconds);
    row.seconds += seconds;
    row.decode_seconds += r["decode_seconds"].get<double>();
    chain_sum += r["chain_sum"].get<double>();
    tree_windows += r["tree_windows"].get<int64_t>();
    k_sum += r["tree_k_sum"].get<int64_t>();
    depth_sum += r["tree_depth_sum"].get<int64_t>();
    const auto h = r["accepted_histogram"].get<std::vector<int64_t>>();
    if (h.size() > histogram.size()) histogram.resize(h.size(), 0);
    for (size_t n = 0; n < h.size(); ++n) histogram[n] += h[n];
  }
  if (row.runs == 0) return row;
  row.steps = static_cast<double>(steps) / row.runs;
  row.step_compression = steps > 0 ? static_cast<double>(tokens) / steps : 0.0;
  row.accepted_drafts = row.step_compression - 1.0;
  row.seconds /= row.runs;
  row.decode_seconds /= row.runs;
  row.mean_chain = steps > 0 ? chain_sum / static_cast<double>(steps) : 0.0;
  row.mean_tree_k = tree_windows > 0 ? static_cast<double>(k_sum) / tree_windows : 0.0;
  row.mean_tree_depth = tree_windows > 0 ? static_cast<double>(depth_sum) / tree_windows : 0.0;
  for (const int64_t count : histogram) {
    row.accepted_share.push_back(steps > 0 ? static_cast<double>(count) / steps : 0.0);
  }
  return row;
}

// One `sjd compare` invocation: its runs (prompts x seeds x methods, in index order), the ones an
// earlier invocation recorded in runs/manifest.jsonl, and the new ones, recorded as each finishes.
class CompareSession {
 public:
  // Checks the bundle and the output folder, and lays out the runs with their settings.
  CompareSession(Generator& generator, const CompareOptions& options, std::ostream& log);
  CompareReport run();

 private:
  nlohmann::json identity_of(int64_t i) const;
  // Whether run i's image is drawn in compare.png (its first kCompareFigureRows rows of methods).
  bool in_figure(int64_t i) const {
    return i < static_cast<int64_t>(kCompareFigureRows) * static_cast<int64_t>(options_.methods.size());
  }
  void resume_recorded();
  int64_t record_index_of(int64_t i);
  std::string progress_text(int64_t i) const;
  void write_run(const BatchItem& item, const GenerationOutput& out);
  void decode_group(const std::vector<int64_t>& group);
  void summarise_rows();

  Generator& generator_;
  const CompareOptions& options_;
  std::ostream& log_;
  const int methods_;
  const int64_t total_;
  const std::filesystem::path runs_dir_;
  const std::filesystem::path manifest_;  // read as a batch folder's manifest
  const std::string model_;
  const std::string weights_;  // the fingerprint of the bundle's weight files (weights_fingerprint.h)
  std::vector<CompareRun> runs_;
  std::vector<GenerationSettings> settings_;  // per run
  std::vector<nlohmann::json> planning_;      // per method entry: what its automatic windows read from the bundle
  CompareReport report_;
  std::set<int64_t> taken_;                   // the recorded runs' indices: a new run's record and file reuse none
  std::map<int64_t, int64_t> redo_index_;     // run -> the index of its recorded line that cannot be used
  ProgressLine progress_;
  std::chrono::steady_clock::time_point start_;
};

CompareSession::CompareSession(Generator& generator, const CompareOptions& options, std::ostream& log)
    : generator_(generator),
      options_(options),
      log_(log),
      methods_(static_cast<int>(options.methods.size())),
      total_(static_cast<int64_t>(options.prompts.size()) * options.seeds * methods_),
      runs_dir_(options.out_dir / "runs"),
      manifest_(runs_dir_ / "manifest.jsonl"),
      model_(generator.bundle().name),
      weights_(weights_fingerprint(generator.bundle())),
      progress_(log, options.progress) {
  check_window_prior(generator_.bundle());  // a malformed bundle is refused even when every run is resumed
  prepare_output_dir(runs_dir_);
  if (const int removed = io::remove_stale_temporaries(runs_dir_); removed > 0) {
    log_ << "removed " << removed << " temporary file(s) left by an interrupted run\n";
  }
  for (size_t p = 0; p < options_.prompts.size(); ++p) {  // every method's run of it sees the same positions
    const std::string warning = generator_.context_warning(options_.prompts[p], options_.base);
    if (!warning.empty()) log_ << "warning: prompt " << p + 1 << ": " << warning << "\n";
  }
  runs_.resize(static_cast<size_t>(total_));
  settings_.resize(static_cast<size_t>(total_));
  for (int64_t i = 0; i < total_; ++i) {
    CompareRun& run = runs_[static_cast<size_t>(i)];
    run.index = i;
    run.method = static_cast<int>(i % methods_);
    run.seed_index = static_cast<int>((i / methods_) % options_.seeds);
    run.prompt = static_cast<int>(i / methods_ / options_.seeds);
    GenerationSettings& settings = settings_[static_cast<size_t>(i)];
    settings = compare_settings(options_.base, options_.methods[static_cast<size_t>(run.method)]);
    settings.seed = options_.base.seed + static_cast<uint64_t>(run.seed_index);
  }
  for (const std::string& entry : options_.methods) {
    planning_.push_back(generator_.window_planning(compare_settings(options_.base, entry)));
  }
}

nlohmann::json CompareSession::identity_of(int64_t i) const {
  const CompareRun& run = runs_[static_cast<size_t>(i)];
  const GenerationSettings& settings = settings_[static_cast<size_t>(i)];
  // A compare's rows time each run in its batch, so the batch size is part of a run even where its image is not.
  nlohmann::json made_with = identity_settings(settings);
  made_with["batch_size"] = settings_to_json(settings)["batch_size"];
  return image_identity(text::utf8::to_valid(options_.prompts[static_cast<size_t>(run.prompt)]), {model_, weights_},
                        std::move(made_with), planning_[static_cast<size_t>(run.method)]);
}

// Earlier runs are found by what they are, not by their place, so a --methods list, --seeds count or prompt
// file that changed keeps the runs it shares with the earlier command.
void CompareSession::resume_recorded() {
  ManifestReader reader(runs_dir_, log_);
  std::map<int64_t, FinishedImage> recorded = reader.read_new();
  std::multimap<std::string, FinishedImage*> recorded_by_key;
  const auto key_of = [](const FinishedImage& image) {
    return run_key(image.record.value("prompt", std::string()),
                   image.record.value("settings", nlohmann::json::object()));
  };
  for (auto& [index, done] : recorded) {
    taken_.insert(index);
    recorded_by_key.emplace(key_of(done), &done);
  }
  // A run whose image was damaged is made again under its line's index, so into its file: under a new one, the
  // damaged file stayed and was warned about on every later run.
  std::multimap<std::string, const FinishedImage*> damaged_by_key;
  for (const auto& [index, damaged] : reader.damaged()) {
    if (recorded.count(index)) continue;
    taken_.insert(index);
    damaged_by_key.emplace(key_of(damaged), &damaged);
  }
  for (int64_t i = 0; i < total_; ++i) {
    const nlohmann::json expected = identity_of(i);
    const std::string key = run_key(expected["prompt"], expected["settings"]);
    const auto [first, last] = recorded_by_key.equal_range(key);
    if (first == last) {  // not made yet, or its image is damaged
      const auto [bad, bad_end] = damaged_by_key.equal_range(key);
      const auto again =
          std::find_if(bad, bad_end, [&](const auto& entry) { return is_same_run(*entry.second, expected); });
      if (again != bad_end) {
        redo_index_[i] = again->second->record["index"].get<int64_t>();
        damaged_by_key.erase(again);
      }
      continue;
    }
    const auto match =
        std::find_if(first, last, [&](const auto& entry) { return is_same_run(*entry.second, expected); });
    if (match == last) {
      check_same_run(*first->second, expected, "the same settings and bundle");  // throws, naming what differs
    }
    FinishedImage& done = *match->second;
    const std::string problem = run_record_problem(done.record);
    if (!problem.empty()) {
      log_ << "warning: " << manifest_.string() << ":" << done.line << ": " << problem
           << "; the run will be made again\n";
      redo_index_[i] = done.record["index"].get<int64_t>();
      continue;
    }
    CompareRun& run = runs_[static_cast<size_t>(i)];
    if (in_figure(i)) run.image = io::read_png_rgb(runs_dir_ / done.record["file"].get<std::string>());
    run.record = done.record;
    run.resumed = true;
    ++report_.resumed;
  }
}

// The index a new run's line and file take: its place in this command's order when no recorded run holds it,
// as in a fresh folder; else the next unused one.
int64_t CompareSession::record_index_of(int64_t i) {
  if (const auto redo = redo_index_.find(i); redo != redo_index_.end()) return redo->second;  // replaces that line
  const int64_t index = taken_.count(i) == 0 ? i : *taken_.rbegin() + 1;
  taken_.insert(index);
  return index;
}

std::string CompareSession::progress_text(int64_t i) const {
  const CompareRun& run = runs_[static_cast<size_t>(i)];
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string label = options_.methods[static_cast<size_t>(run.method)] + ", seed " +
                            std::to_string(settings_[static_cast<size_t>(i)].seed) + ", prompt " +
                            std::to_string(run.prompt + 1) + "/" + std::to_string(options_.prompts.size());
  return count_progress_text(report_.resumed + report_.made, total_, report_.made, elapsed, label);
}

void CompareSession::write_run(const BatchItem& item, const GenerationOutput& out) {
  CompareRun& run = runs_[static_cast<size_t>(item.id)];
  const std::string& entry = options_.methods[static_cast<size_t>(run.method)];
  const int64_t index = record_index_of(item.id);
  const std::string file = run_file_name(index, entry, item.settings.seed);
  const double write_seconds = write_image(runs_dir_ / file, out, item.prompt, model_);
  run.record = run_record(index, run, item.prompt, {model_, weights_}, entry, out, file,
                          out.total_seconds + write_seconds);
  if (const nlohmann::json& p = planning_[static_cast<size_t>(run.method)]; !p.is_null()) run.record["planning"] = p;
  record_file_checksum(run.record, runs_dir_ / file);
  io::append_line(manifest_, run.record.dump());
  if (in_figure(item.id)) run.image = out.image;
  ++report_.made;
  progress_.show(progress_text(item.id), true);
}

// Decodes a group of runs of one method through one continuous batch (decoder.h, decode_batch).
void CompareSession::decode_group(const std::vector<int64_t>& group) {
  const auto prompt_of = [&](int64_t i) {
    return options_.prompts[static_cast<size_t>(runs_[static_cast<size_t>(i)].prompt)];
  };
  BatchPlan plan;
  plan.settings = settings_[static_cast<size_t>(group.front())];
  for (const int64_t i : group) plan.prompts.push_back(prompt_of(i));
  plan.settings.batch_size = generator_.resolve_batch_size(plan);  // one that does not fit exits 2 with the estimate
  if (progress_.enabled()) {
    plan.on_step = [this](int64_t id, const decoding::StepProgress& p) {
      progress_.show(progress_text(id) + ": tokens " + std::to_string(p.tokens_done) + "/" +
                     std::to_string(p.tokens_total));
    };
  }
  size_t cursor = 0;
  generator_.generate_batch(
      plan,
      [&]() -> std::optional<BatchItem> {
        if (cursor == group.size()) return std::nullopt;
        if (options_.stop_requested && (report_.stopped_by = options_.stop_requested()) != 0) return std::nullopt;
        const int64_t i = group[cursor++];
        return BatchItem{i, prompt_of(i), settings_[static_cast<size_t>(i)]};
      },
      [this](const BatchItem& item, const GenerationOutput& out) { write_run(item, out); },
      [this](const BatchItem& item, const std::string& error) {  // the report needs every run: stop with exit 2
        throw InputError("prompt " + std::to_string(runs_[static_cast<size_t>(item.id)].prompt + 1) + ": " + error);
      });
}

// A row per method, in --methods order, with its speed-up against the first ar entry when there is one.
void CompareSession::summarise_rows() {
  for (int m = 0; m < methods_; ++m) {
    std::vector<const CompareRun*> of_method;
    for (const CompareRun& run : runs_) {
      if (run.method == m) of_method.push_back(&run);
    }
    report_.rows.push_back(summarise(options_.methods[static_cast<size_t>(m)], of_method));
  }
  for (int m = 0; m < methods_; ++m) {
    if (compare_settings(options_.base, options_.methods[static_cast<size_t>(m)]).method != "ar") continue;
    const CompareRow ar = report_.rows[static_cast<size_t>(m)];
    for (auto& row : report_.rows) {
      row.speedup = row.seconds > 0.0 ? ar.seconds / row.seconds : 0.0;
      row.decode_speedup = row.decode_seconds > 0.0 ? ar.decode_seconds / row.decode_seconds : 0.0;
    }
    break;
  }
}

CompareReport CompareSession::run() {
  resume_recorded();
  start_ = std::chrono::steady_clock::now();
  // At batch size 1 the runs go in index order, one at a time, so every method meets the machine's load of the
  // same minutes; at B > 1 each method's runs form one continuously refilled batch.
  const bool batched = compare_settings(options_.base, options_.methods.front()).batch_size > 1;
  for (int m = 0; m < (batched ? methods_ : 1); ++m) {
    std::vector<int64_t> pending;
    for (const CompareRun& run : runs_) {
      if (run.resumed || (batched && run.method != m)) continue;
      if (report_.stopped_by != 0) break;
      if (batched) {
        pending.push_back(run.index);
      } else {
        decode_group({run.index});
      }
    }
    if (!pending.empty()) decode_group(pending);
  }
  progress_.finish();
  // A table needs every run: after a stop with runs left, the next invocation makes them.
  const bool complete = report_.resumed + report_.made == total_;
  if (report_.stopped_by != 0 && complete) report_.stopped_by = 0;  // the stop came when every run was made
  if (report_.stopped_by == 0) summarise_rows();
  report_.runs = std::move(runs_);
  return report_;
}

}  // namespace

GenerationSettings compare_settings(const GenerationSettings& base, const std::string& entry) {
  GenerationSettings settings = base;
  settings.method = entry;
  split_method_entry(settings);
  method_from_settings(settings);  // throws for a bad method or relaxation
  settings.batch_size = compare_batch_size(base);
  return settings;
}

int compare_batch_size(const GenerationSettings& base) { return base.batch_size == kAuto ? 1 : base.batch_size; }

CompareReport run_compare(Generator& generator, const CompareOptions& options, std::ostream& log) {
  CompareSession session(generator, options, log);
  return session.run();
}

}  // namespace sjd::engine
