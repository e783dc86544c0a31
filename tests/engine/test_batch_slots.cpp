// A batch reserves KV cache for the sequences that can be in flight at once: no
// more than its batch size, and no more than the prompts it has left to decode.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <sstream>

#include "cli_runner.h"
#include "engine/batch.h"
#include "engine/generator.h"
#include "testing/test_support.h"

using namespace sjd;

namespace {

// The cache rows a batch of `batch_size` reserves for `prompts` prompts left to decode.
int64_t cache_rows(int batch_size, int prompts) {
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::BatchPlan plan;
  engine::apply_settings(plan.settings, bundle.defaults, "bundle defaults");
  plan.settings.method = "sjd";
  plan.settings.batch_size = batch_size;
  for (int i = 0; i < prompts; ++i) plan.prompts.push_back(i % 2 ? "a small red square" : "a large blue circle");
  engine::Generator generator(std::move(bundle));
  int64_t next = 0, made = 0;
  generator.generate_batch(
      plan,
      [&]() -> std::optional<engine::BatchItem> {
        if (next == prompts) return std::nullopt;
        engine::BatchItem item{next, plan.prompts[static_cast<size_t>(next)], plan.settings};
        item.settings.seed = static_cast<uint64_t>(next++);
        return item;
      },
      [&](const engine::BatchItem&, engine::GenerationOutput) { ++made; },
      [&](const engine::BatchItem&, const std::string& error) { FAIL(error); });
  CHECK(made == prompts);
  return generator.transformer().cache().rows();
}

// `sjd batch` of `prompts` (a file) into `out` with a fresh generator, its first `limit` prompts (0: all);
// returns the KV cache's positions per row.
int64_t batch_cache_capacity(const std::filesystem::path& prompts, const std::filesystem::path& out, int64_t limit) {
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::BatchOptions options;
  options.prompts = prompts;
  options.out_dir = out;
  options.limit = limit;
  engine::apply_settings(options.settings, bundle.defaults, "bundle defaults");
  options.settings.batch_size = 2;
  engine::Generator generator(std::move(bundle));
  std::ostringstream log;
  const engine::BatchSummary summary = engine::run_batch(generator, options, log);
  INFO(log.str());
  CHECK(summary.failed == 0);
  return generator.transformer().cache().capacity();
}

// The smallest --max-memory (to 1 MB) that `fits`, which must hold at 64 GB.
int64_t smallest_limit(const std::function<bool(int64_t)>& fits) {
  int64_t low = int64_t{1} << 20, high = int64_t{64} << 30;
  REQUIRE(fits(high));
  while (high - low > (int64_t{1} << 20)) {
    const int64_t middle = low + (high - low) / 2;
    (fits(middle) ? high : low) = middle;
  }
  return high;
}

}  // namespace

TEST_CASE("a batch's KV cache has slots for its batch size or its prompts left, the fewer", "[engine][batch]") {
  CHECK(cache_rows(8, 2) == 2 * 2);  // two prompts with CFG: two rows each
  CHECK(cache_rows(8, 1) == 1 * 2);  // a resumed batch with one left
  CHECK(cache_rows(2, 3) == 2 * 2);  // more prompts than the batch takes
}

TEST_CASE("a resumed batch sizes its cache for the prompts it has left, and makes the same images",
          "[engine][batch]") {
  testing::TempDir dir("resume_measure");
  std::string long_prompt = "a large blue circle";
  for (int i = 0; i < 12; ++i) long_prompt += " and a large blue circle";
  testing::write_file(dir / "p.txt", long_prompt + "\na small red square\n");
  testing::write_file(dir / "short.txt", "a small red square\n");
  const int64_t whole = batch_cache_capacity(dir / "p.txt", dir / "whole", 0);
  const int64_t short_alone = batch_cache_capacity(dir / "short.txt", dir / "short", 0);
  REQUIRE(short_alone < whole);  // the long prompt needs the longer rows
  batch_cache_capacity(dir / "p.txt", dir / "resumed", 1);  // the long prompt's image, then a stop
  // Resumed, the finished long prompt is neither measured nor tokenised: the rows fit the short one.
  CHECK(batch_cache_capacity(dir / "p.txt", dir / "resumed", 0) == short_alone);
  int images = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "whole")) {
    if (entry.path().extension() != ".png") continue;
    const std::filesystem::path resumed = dir / "resumed" / entry.path().filename();
    INFO(resumed);
    REQUIRE(std::filesystem::exists(resumed));
    CHECK(testing::read_file(resumed) == testing::read_file(entry.path()));
    ++images;
  }
  CHECK(images == 2);
}

TEST_CASE("a batch size given is held to the slots it fills, an automatic one to the batch size", "[engine][batch]") {
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::BatchPlan plan;
  engine::apply_settings(plan.settings, bundle.defaults, "bundle defaults");
  plan.settings.method = "sjd";
  for (int i = 0; i < 8; ++i) plan.prompts.push_back("a large blue circle");
  engine::Generator generator(std::move(bundle));
  const auto fits = [&](int batch_size, int64_t pending, int64_t limit) {
    plan.settings.batch_size = batch_size;
    plan.prompts.assign(static_cast<size_t>(pending), "a large blue circle");
    plan.measured.reset();
    generator.set_memory_limit(limit);
    try {
      return generator.resolve_batch_size(plan) == batch_size;
    } catch (const engine::InputError&) {
      return false;
    }
  };
  // The smallest --max-memory a batch of 2 fits.
  const int64_t high = smallest_limit([&](int64_t limit) { return fits(2, 8, limit); });
  CHECK(fits(8, 2, high));         // 8 given, 2 prompts left: two slots' memory
  CHECK_FALSE(fits(8, 8, high));   // 8 given and 8 left: refused
  plan.settings.batch_size = engine::kAuto;
  plan.prompts.assign(2, "a large blue circle");
  plan.measured.reset();
  generator.set_memory_limit(high);
  CHECK(generator.resolve_batch_size(plan) == 2);  // auto halves on the batch size, whatever is left
}

TEST_CASE("a larger cache the model keeps is counted whole, not as the one asked for", "[engine][batch][memory]") {
  // Transformer::reserve keeps a cache of the same rows and room enough (compare's methods reserve
  // more or less in turn), so the generation holds that cache: the estimate must count it.
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::BatchPlan plan;
  engine::apply_settings(plan.settings, bundle.defaults, "bundle defaults");
  plan.settings.method = "sjd";
  plan.settings.batch_size = 2;
  for (int i = 0; i < 8; ++i) plan.prompts.push_back("a large blue circle");
  engine::Generator generator(std::move(bundle));
  const auto fits = [&](int64_t limit) {
    generator.set_memory_limit(limit);
    try {
      return generator.resolve_batch_size(plan) == 2;
    } catch (const engine::InputError&) {
      return false;
    }
  };
  // The smallest --max-memory a batch of 2 fits with nothing held.
  const int64_t high = smallest_limit(fits);
  // The batch's 4 rows (2 prompts with CFG), each with four times the room a generation asks for.
  model::Transformer& model = generator.transformer();
  model.reserve(4, 4 * 4096, 4 * 4096);
  CHECK_FALSE(fits(high));
  // Rows of another count are made again at the size asked for: the estimate stands.
  model.reserve(6, 4 * 4096, 4 * 4096);
  CHECK(fits(high));
  model.release_cache();
  CHECK(fits(high));
}

TEST_CASE("an automatic batch size is chosen for the whole run's longest prompt, finished or not", "[engine][batch]") {
  engine::Bundle bundle = engine::load_bundle(testing::default_model());
  engine::BatchPlan plan;
  engine::apply_settings(plan.settings, bundle.defaults, "bundle defaults");
  plan.settings.method = "sjd";
  engine::Generator generator(std::move(bundle));
  const auto resolved = [&](std::vector<std::string> left, std::vector<std::string> all, int64_t limit) {
    plan.settings.batch_size = engine::kAuto;
    plan.prompts = std::move(left);
    plan.all_prompts = std::move(all);
    plan.measured.reset();
    generator.set_memory_limit(limit);
    try {
      return generator.resolve_batch_size(plan);
    } catch (const engine::InputError&) {
      return 0;
    }
  };
  std::string long_prompt = "a large blue circle";
  for (int i = 0; i < 12; ++i) long_prompt += " and a large blue circle";
  const std::string short_prompt = "a small red square";
  const std::vector<std::string> whole = {long_prompt, short_prompt};
  // Just below the memory a whole run needs for the CPU's batch of 8, it halves to 4.
  const int64_t below = smallest_limit([&](int64_t limit) { return resolved(whole, whole, limit) == 8; }) -
                        (int64_t{1} << 20);
  REQUIRE(resolved(whole, whole, below) == 4);
  REQUIRE(resolved({short_prompt}, {}, below) == 8);  // the short prompt alone would take 8
  // Resumed with only the short prompt left, the run chooses what it first did.
  CHECK(resolved({short_prompt}, whole, below) == 4);
}
