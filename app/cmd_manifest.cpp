// `sjd manifest DIR`: done / failed / missing images of a batch folder, per shard
// and overall; `--merge` folds the shards' manifests into one manifest.jsonl.
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "run_guarded.h"
#include "engine/batch_status.h"
#include "engine/bundle.h"
#include "engine/outputs.h"
#include "io/prompt_file.h"

namespace sjd::app {
namespace {

struct ManifestArgs {
  std::string dir;
  std::string prompts;  // the image count from a prompt file instead of batch.json
  int64_t limit = 0;
  bool merge = false;
};

int run_manifest_command(const ManifestArgs& args) {
  if (args.limit < 0) throw engine::InputError("--limit must not be negative (0 = every prompt)");
  if (!std::filesystem::exists(args.dir)) throw engine::InputError(args.dir + ": no such folder");
  if (!std::filesystem::is_directory(args.dir)) throw engine::InputError(args.dir + ": not a folder");
  if (args.limit > 0 && args.prompts.empty()) {
    throw engine::InputError("--limit counts the first N prompts of --prompts FILE: give it too");
  }
  // A compare folder has no batch.json, and --prompts would count its prompts as images it never made.
  if (engine::holds_run(args.dir, engine::RunFolder::kCompare) &&
      !engine::holds_run(args.dir, engine::RunFolder::kBatch)) {
    throw engine::InputError(args.dir + " holds a compare run (compare.json, runs/), and sjd manifest reads batch "
                             "folders: the compare command that made it resumes it, and its runs are listed in "
                             "compare.json and runs/manifest.jsonl");
  }
  int64_t images = 0;
  std::vector<std::string> prompts;  // --prompts: each image's prompt, to tell another file's images apart
  if (args.prompts.empty()) {
    images = engine::recorded_batch_size(args.dir);
  } else {
    for (io::PromptEntry& entry : io::read_prompts(args.prompts)) prompts.push_back(std::move(entry.prompt));
    if (args.limit > 0 && static_cast<int64_t>(prompts.size()) > args.limit) prompts.resize(args.limit);
    images = static_cast<int64_t>(prompts.size());
  }
  if (args.merge) {
    const engine::MergeResult merged = engine::merge_manifests(args.dir, std::cerr);
    std::cout << "merged " << merged.done << " done and " << merged.failed << " failed image(s) into "
              << (std::filesystem::path(args.dir) / "manifest.jsonl").string() << " (" << merged.shard_manifests_removed
              << " shard manifest(s) folded in"
              << (merged.ignored_lines > 0
                      ? "; the " + std::to_string(merged.ignored_lines) + " line(s) it cannot read kept at its end"
                      : std::string())
              << ")\n";
  }
  const engine::BatchStatus status =
      engine::batch_status(args.dir, images, std::cerr, args.prompts.empty() ? nullptr : &prompts);
  engine::print_batch_status(status, std::cout);
  return status.complete() ? 0 : 1;
}

}  // namespace

void add_manifest_command(CLI::App& app) {
  auto args = std::make_shared<ManifestArgs>();
  CLI::App* cmd = app.add_subcommand(
      "manifest", "done / failed / missing images of a batch folder, per shard (exit code 1 until complete)");
  cmd->add_option("dir", args->dir, "the batch --out-dir")->required();
  cmd->add_flag("--merge", args->merge,
                "write one manifest.jsonl ordered by index from every manifest of the folder (replaces the shards' "
                "manifests)");
  cmd->add_option("--prompts", args->prompts, "count the images from this prompt file (default: DIR/batch.json)");
  add_integer_option(*cmd, "--limit", args->limit, "with --prompts: only the first N prompts (0 = all)");
  cmd->callback([args]() { command_exit_code() = run_guarded([&] { return run_manifest_command(*args); }); });
}

}  // namespace sjd::app
