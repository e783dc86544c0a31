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
nlohmann::json run_record(int64_t index, const CompareRun& run, const std::string& prompt, const std::string& model,
                          const std::string& entry, const GenerationOutput& out, const std::string& file,
                          double seconds) {
  const decoding::RunStats& st = out.stats;
  return {{"index", index},
          {"status", "ok"},
          {"file", file},
          {"prompt", text::utf8::to_valid(prompt)},
          {"prompt_index", run.prompt},
          {"model", model},
          {"settings", settings_to_json(out.settings)},
          {"entry", entry},
          {"seed", out.settings.seed},
          {"method", out.method.describe()},
          {"exactness", decoding::exactness_name(out.method.exactness())},
          {"steps", st.steps},
          {"tokens", st.tokens},
          {"step_compression", st.step_compression()},
          {"seconds", seconds},
          {"decode_seconds", st.prefill_seconds + st.forward_seconds + st.pipeline_seconds + st.verify_seconds},
          {"chain_sum", st.mean_chain() * static_cast<double>(st.steps)},
          {"tree_windows", st.tree_windows},
          {"tree_k_sum", st.tree_k_sum},
          {"tree_depth_sum", st.tree_depth_sum},
          {"accepted_histogram", st.accepted_histogram}};
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

std::string progress_label(const CompareOptions& options, const CompareRun& run, uint64_t seed) {
  return options.methods[static_cast<size_t>(run.method)] + ", seed " + std::to_string(seed) + ", prompt " +
         std::to_string(run.prompt + 1) + "/" + std::to_string(options.prompts.size());
}

}  // namespace

GenerationSettings compare_settings(const GenerationSettings& base, const std::string& entry) {
  GenerationSettings settings = base;
  settings.method = entry;
  split_method_entry(settings);
  method_from_settings(settings);  // throws for a bad method or relaxation
  if (settings.batch_size == kAuto) settings.batch_size = 1;  // by default one run at a time, as generate
  return settings;
}

CompareReport run_compare(Generator& generator, const CompareOptions& options, std::ostream& log) {
  check_window_prior(generator.bundle());  // a malformed bundle is refused even when every run is resumed
  const int methods = static_cast<int>(options.methods.size());
  const int64_t total = static_cast<int64_t>(options.prompts.size()) * options.seeds * methods;
  const std::filesystem::path runs_dir = options.out_dir / "runs";
  const std::filesystem::path manifest = runs_dir / "manifest.jsonl";  // read as a batch folder's manifest
  prepare_output_dir(runs_dir);
  if (const int removed = io::remove_stale_temporaries(runs_dir); removed > 0) {
    log << "removed " << removed << " temporary file(s) left by an interrupted run\n";
  }
  const std::string model = generator.bundle().name;
  for (size_t p = 0; p < options.prompts.size(); ++p) {  // every method's run of it sees the same positions
    const std::string warning = generator.context_warning(options.prompts[p], options.base);
    if (!warning.empty()) log << "warning: prompt " << p + 1 << ": " << warning << "\n";
  }
  std::vector<CompareRun> runs(static_cast<size_t>(total));
  std::vector<GenerationSettings> settings(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    CompareRun& run = runs[static_cast<size_t>(i)];
    run.index = i;
    run.method = static_cast<int>(i % methods);
    run.seed_index = static_cast<int>((i / methods) % options.seeds);
    run.prompt = static_cast<int>(i / methods / options.seeds);
    settings[static_cast<size_t>(i)] = compare_settings(options.base, options.methods[static_cast<size_t>(run.method)]);
    settings[static_cast<size_t>(i)].seed = options.base.seed + static_cast<uint64_t>(run.seed_index);
  }
  std::vector<nlohmann::json> planning;  // per method entry: what its automatic windows read from the bundle
  for (const std::string& entry : options.methods) {
    planning.push_back(generator.window_planning(compare_settings(options.base, entry)));
  }
  const auto identity_of = [&](int64_t i) {
    return image_identity(text::utf8::to_valid(options.prompts[static_cast<size_t>(runs[static_cast<size_t>(i)].prompt)]),
                          model, settings_to_json(settings[static_cast<size_t>(i)]),
                          planning[static_cast<size_t>(runs[static_cast<size_t>(i)].method)]);
  };

  // Earlier runs are found by what they are, not by their place, so a --methods list, --seeds count or prompt
  // file that changed keeps the runs it shares with the earlier command.
  CompareReport report;
  ManifestReader reader(runs_dir, log);
  std::map<int64_t, FinishedImage> recorded = reader.read_new();
  std::multimap<std::string, FinishedImage*> recorded_by_key;
  std::set<int64_t> taken;  // the recorded runs' indices: a new run's record and file must not reuse one
  for (auto& [index, done] : recorded) {
    taken.insert(index);
    recorded_by_key.emplace(run_key(done.record.value("prompt", std::string()),
                                    done.record.value("settings", nlohmann::json::object())),
                            &done);
  }
  std::map<int64_t, int64_t> redo_index;  // run -> the index of its recorded line that cannot be used
  for (int64_t i = 0; i < total; ++i) {
    const nlohmann::json expected = identity_of(i);
    const auto [first, last] = recorded_by_key.equal_range(run_key(expected["prompt"], expected["settings"]));
    if (first == last) continue;  // not made yet
    const auto match =
        std::find_if(first, last, [&](const auto& entry) { return is_same_run(*entry.second, expected); });
    if (match == last) {
      check_same_run(*first->second, expected, "the same settings and bundle");  // throws, naming what differs
    }
    FinishedImage& done = *match->second;
    const std::string problem = run_record_problem(done.record);
    if (!problem.empty()) {
      log << "warning: " << manifest.string() << ":" << done.line << ": " << problem << "; the run will be made again\n";
      redo_index[i] = done.record["index"].get<int64_t>();
      continue;
    }
    CompareRun& run = runs[static_cast<size_t>(i)];
    run.image = io::read_png_rgb(runs_dir / done.record["file"].get<std::string>());
    run.record = done.record;
    run.resumed = true;
    ++report.resumed;
  }
  // The index a new run's line and file take: its place in this command's order when no recorded run holds it,
  // as in a fresh folder; else the next unused one.
  const auto record_index_of = [&](int64_t i) {
    if (const auto redo = redo_index.find(i); redo != redo_index.end()) return redo->second;  // replaces that line
    const int64_t index = taken.count(i) == 0 ? i : *taken.rbegin() + 1;
    taken.insert(index);
    return index;
  };

  ProgressLine progress(log, options.progress);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int64_t made = 0;
  const auto write_run = [&](const BatchItem& item, const GenerationOutput& out) {
    CompareRun& run = runs[static_cast<size_t>(item.id)];
    const std::string& entry = options.methods[static_cast<size_t>(run.method)];
    const int64_t index = record_index_of(item.id);
    const std::string file = run_file_name(index, entry, item.settings.seed);
    const double write_seconds = write_image(runs_dir / file, out, item.prompt, model);
    run.record = run_record(index, run, item.prompt, model, entry, out, file, out.total_seconds + write_seconds);
    if (const nlohmann::json& p = planning[static_cast<size_t>(run.method)]; !p.is_null()) run.record["planning"] = p;
    record_file_checksum(run.record, runs_dir / file);
    io::append_line(manifest, run.record.dump());
    run.image = out.image;
    ++made;
    progress.show(count_progress_text(report.resumed + made, total, made, elapsed(),
                                      progress_label(options, run, item.settings.seed)),
                  true);
  };
  // Decodes a group of runs of one method through one continuous batch (decoder.h, decode_batch).
  const auto decode_group = [&](const std::vector<int64_t>& group) {
    BatchPlan plan;
    plan.settings = settings[static_cast<size_t>(group.front())];
    for (const int64_t i : group) {
      plan.prompts.push_back(options.prompts[static_cast<size_t>(runs[static_cast<size_t>(i)].prompt)]);
    }
    plan.settings.batch_size = generator.resolve_batch_size(plan);  // one that does not fit exits 2 with the estimate
    if (progress.enabled()) {
      plan.on_step = [&](int64_t id, const decoding::StepProgress& p) {
        const CompareRun& run = runs[static_cast<size_t>(id)];
        progress.show(count_progress_text(report.resumed + made, total, made, elapsed(),
                                          progress_label(options, run, settings[static_cast<size_t>(id)].seed)) +
                      ": tokens " + std::to_string(p.tokens_done) + "/" + std::to_string(p.tokens_total));
      };
    }
    size_t cursor = 0;
    generator.generate_batch(
        plan,
        [&]() -> std::optional<BatchItem> {
          if (cursor == group.size()) return std::nullopt;
          if (options.stop_requested && (report.stopped_by = options.stop_requested()) != 0) return std::nullopt;
          const int64_t i = group[cursor++];
          return BatchItem{i, options.prompts[static_cast<size_t>(runs[static_cast<size_t>(i)].prompt)],
                           settings[static_cast<size_t>(i)]};
        },
        write_run,
        [&](const BatchItem& item, const std::string& error) {  // the report needs every run: stop with exit 2
          throw InputError("prompt " + std::to_string(runs[static_cast<size_t>(item.id)].prompt + 1) + ": " + error);
        });
  };
  // At batch size 1 the runs go in index order, one at a time, so every method meets the machine's load of the
  // same minutes; at B > 1 each method's runs form one continuously refilled batch.
  const bool batched = compare_settings(options.base, options.methods.front()).batch_size > 1;
  for (int m = 0; m < (batched ? methods : 1); ++m) {
    std::vector<int64_t> pending;
    for (const CompareRun& run : runs) {
      if (run.resumed || (batched && run.method != m)) continue;
      if (report.stopped_by != 0) break;
      if (batched) {
        pending.push_back(run.index);
      } else {
        decode_group({run.index});
      }
    }
    if (!pending.empty()) decode_group(pending);
  }
  progress.finish();
  report.made = made;
  if (report.stopped_by != 0) {
    if (report.resumed + made < total) {  // a table needs every run: the next invocation makes it
      report.runs = std::move(runs);
      return report;
    }
    report.stopped_by = 0;  // the stop came when every run was made
  }

  for (int m = 0; m < methods; ++m) {
    std::vector<const CompareRun*> of_method;
    for (const CompareRun& run : runs) {
      if (run.method == m) of_method.push_back(&run);
    }
    report.rows.push_back(summarise(options.methods[static_cast<size_t>(m)], of_method));
  }
  for (int m = 0; m < methods; ++m) {
    if (compare_settings(options.base, options.methods[static_cast<size_t>(m)]).method != "ar") continue;
    const CompareRow ar = report.rows[static_cast<size_t>(m)];
    for (auto& row : report.rows) {
      row.speedup = row.seconds > 0.0 ? ar.seconds / row.seconds : 0.0;
      row.decode_speedup = row.decode_seconds > 0.0 ? ar.decode_seconds / row.decode_seconds : 0.0;
    }
    break;
  }
  report.runs = std::move(runs);
  return report;
}

}  // namespace sjd::engine
