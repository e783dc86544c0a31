// What a person meets at the command line (issue 13): honest exactness labels,
// --version, the spellings every command accepts, output paths checked before
// any work, and errors that say what is missing or what was probably meant.
#include <catch2/catch.hpp>

#include <torch/version.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "cli_runner.h"
#include "io/png_reader.h"
#include "testing/test_support.h"

using namespace sjd::testing;
using Catch::Matchers::Contains;

namespace {

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

std::string generate_command() { return "generate --model " + quoted(default_model()) + " -p 'a red apple' --seed 1"; }

nlohmann::json read_json(const std::filesystem::path& file) { return nlohmann::json::parse(read_file(file)); }

}  // namespace

TEST_CASE("sjd --version names the version, the commit, LibTorch and CUDA", "[cli][ux]") {
  const auto r = run_sjd("--version");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // The commit is 12 hex digits (with -dirty for uncommitted changes), or "unknown" outside git.
  CHECK(std::regex_search(r.out, std::regex(R"(^sjd \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n)")));
  const std::string torch = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                            std::to_string(TORCH_VERSION_PATCH);
  CHECK_THAT(r.out, Contains("LibTorch " + torch));
  CHECK(std::regex_search(r.out, std::regex(R"(CUDA: (yes|no))")));
}

TEST_CASE("sjd's OpenMP threads sleep when idle unless the environment chose how they wait", "[cli][ux]") {
  // libgomp prints the settings it read at start (OMP_DISPLAY_ENV), after sjd restarted itself with its own.
  const std::string shown = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose";
  const auto passive = run_sjd_env(shown, "--version");
  REQUIRE(passive.exit_code == 0);
  CHECK_THAT(passive.out, Contains("LibTorch"));  // the restarted program did its work
  CHECK_THAT(passive.err, Contains("OMP_WAIT_POLICY = 'PASSIVE'") && Contains("GOMP_SPINCOUNT = '0'"));
  // A choice in the environment is kept, spinning (GOMP_SPINCOUNT) or active waiting (OMP_WAIT_POLICY).
  const auto spinning = run_sjd_env(shown + " GOMP_SPINCOUNT=300000", "--version");
  CHECK_THAT(spinning.err, Contains("GOMP_SPINCOUNT = '300000'"));
  const auto active = run_sjd_env(shown + " OMP_WAIT_POLICY=active", "--version");
  CHECK_THAT(active.err, Contains("OMP_WAIT_POLICY = 'ACTIVE'"));
  // Arguments reach the restarted program as given.
  const auto quoted_prompt = run_sjd("tokenize --kind byte --options '{\"first_id\": 0}' 'a b'");
  CHECK(quoted_prompt.out == "[97,32,98]\n");
}

TEST_CASE("jacobi is labelled greedy everywhere and says it ignores a temperature", "[cli][ux]") {
  TempDir dir("ux_jacobi");
  const auto stats = dir / "s.json";
  const auto r = run_sjd(generate_command() + " --method jacobi --temperature 0.5 -o " + quoted(dir / "j.png") +
                         " --stats " + quoted(stats));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("temperature 0.5 is ignored"));
  CHECK_THAT(r.out, Contains("[greedy]"));
  const auto s = read_json(stats);
  CHECK(s["exactness"] == "greedy");
  CHECK_THAT(s["method"].get<std::string>(), Contains("[greedy]") && !Contains("relax="));
}

TEST_CASE("stats JSON: exactness, prompt, model, image path and resolved automatic sizes", "[cli][ux]") {
  TempDir dir("ux_stats");
  const auto stats = dir / "s.json";
  const auto image = dir / "x.png";
  const auto r = run_sjd(generate_command() + " --method sjd --relax cool -o " + quoted(image) + " --stats " +
                         quoted(stats));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("ignored") == std::string::npos);  // the note is for jacobi only
  const auto s = read_json(stats);
  CHECK(s["exactness"] == "lossy");
  CHECK(s["lossless"] == false);
  CHECK_THAT(s["method"].get<std::string>(), Contains("relax=cool, delta=2, nu=0.05") && Contains("[LOSSY]"));
  CHECK(s["prompt"] == "a red apple");
  CHECK(s["model"]["name"] == "sjd-default-scenes");
  CHECK(std::filesystem::equivalent(s["model"]["path"].get<std::string>(), default_model()));
  CHECK(std::filesystem::path(s["image"].get<std::string>()).is_absolute());
  CHECK(std::filesystem::equivalent(s["image"].get<std::string>(), image));
  CHECK(s["settings"]["window"] == "auto");

  // ar at its default temperature samples the model's distribution: exact.
  const auto ar = run_sjd(generate_command() + " --method ar -o " + quoted(image) + " --stats " + quoted(stats));
  REQUIRE(ar.exit_code == 0);
  CHECK(read_json(stats)["exactness"] == "exact");
}

TEST_CASE("compare: --methods with spaces, name:relaxation, and an exactness column", "[cli][ux]") {
  TempDir dir("ux_compare");
  const auto r = run_sjd("compare --model " + quoted(default_model()) + " -p 'a blue square' --methods 'ar, jacobi ,sjd:cool'" +
                         " --out-dir " + quoted(dir / "out"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("exactness"));
  const auto report = read_json(dir / "out" / "compare.json");
  REQUIRE(report["methods"].size() == 3);
  CHECK(report["methods"][0]["exactness"] == "exact");
  CHECK(report["methods"][1]["exactness"] == "greedy");
  CHECK(report["methods"][2]["exactness"] == "lossy");
  // A method listed twice would make the same images twice and compare them with themselves.
  const auto twice = run_sjd("compare --model " + quoted(default_model()) + " -p 'a blue square' --methods 'ar, sjd,ar'" +
                             " --out-dir " + quoted(dir / "twice"));
  CHECK(twice.exit_code == 2);
  CHECK_THAT(twice.err, Contains("--methods lists ar twice"));
  for (const auto& [methods, said] : std::vector<std::pair<std::string, std::string>>{
           {"ar,pac-ac,scd-mc", "--methods lists scd-mc twice (as pac-ac and scd-mc)"},
           {"sjd:none,sjd", "--methods lists sjd twice (as sjd:none and sjd)"},
           // A bad entry is named with the flag ("unknown relaxation ''" alone said neither).
           {"ar,sjd-pac:", "--methods entry 'sjd-pac:': unknown relaxation ''"},
           {"ar,:cool", "--methods entry ':cool': unknown method ''"},
           // A stray comma left a method out without a word.
           {"ar,", "--methods 'ar,': entry 2 is empty"},
           {"'ar, ,sjd'", "--methods 'ar, ,sjd': entry 2 is empty"}}) {
    const auto alias = run_sjd("compare --model " + quoted(default_model()) + " -p 'a blue square' --methods " +
                               methods + " --out-dir " + quoted(dir / "alias"));
    CHECK(alias.exit_code == 2);
    CHECK_THAT(alias.err, Contains(said));
  }
  // compare's help lists --methods, not the --method and --relax it ignores or refuses.
  const std::string help = run_sjd("compare --help").out;
  CHECK_THAT(help, Contains("--methods"));
  CHECK_FALSE(std::regex_search(help, std::regex(R"(--method\b|--relax)")));
}

TEST_CASE("generate --method accepts the name:relaxation spelling", "[cli][ux]") {
  TempDir dir("ux_method_relax");
  const auto stats = dir / "s.json";
  const auto r = run_sjd(generate_command() + " --method sjd-pac:lantern -o " + quoted(dir / "x.png") + " --stats " +
                         quoted(stats));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto s = read_json(stats);
  CHECK(s["settings"]["method"] == "sjd-pac");
  CHECK(s["settings"]["relax"] == "lantern");
  // A config file takes the same spelling (refused here for its misspelt relaxation, before any work).
  write_file(dir / "c.json", R"({"method": "sjd:lantren"})");
  const auto bad = run_sjd(generate_command() + " -o " + quoted(dir / "y.png") + " --config " + quoted(dir / "c.json"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("did you mean 'lantern'"));
}

TEST_CASE("every output path is checked before any work", "[cli][ux]") {
  TempDir dir("ux_outputs");
  write_file(dir / "file", "not a folder");
  const auto image = dir / "x.png";
  for (const std::string flag : {"--stats", "--tokens", "--heatmap", "-o"}) {
    const auto blocked = dir / "file" / (flag == "--heatmap" || flag == "-o" ? "h.png" : "s.json");
    const std::string output = flag == "-o" ? "" : " -o " + quoted(image);
    const auto r = run_sjd(generate_command() + output + " " + flag + " " + quoted(blocked));
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(blocked.string()));
    CHECK_FALSE(std::filesystem::exists(image));  // refused before the image was made
  }
}

TEST_CASE("generate -o creates missing folders", "[cli][ux]") {
  TempDir dir("ux_output_folder");
  const auto image = dir / "newdir" / "sub" / "x.png";
  const auto r = run_sjd(generate_command() + " -o " + quoted(image));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::is_regular_file(image));
  CHECK_THAT(r.out, Contains("wrote " + image.string() + " (128x128)\n"));
  // A second run replaces the image, and says so.
  const auto again = run_sjd(generate_command() + " -o " + quoted(image));
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Contains("(128x128, replacing the file that was there)"));
}

TEST_CASE("generate puts its image in place last: an output it cannot write leaves the image that was there",
          "[cli][ux]") {
  // A file-size limit that the image (about 23 kB) fits and the step heatmap (about 43 kB) does not, as a disk that
  // fills between the two: the image had already been replaced when the run failed.
  TempDir dir("ux_image_last");
  write_file(dir / "x.png", "OLD");
  const std::string outputs = " -o " + quoted(dir / "x.png") + " --heatmap " + quoted(dir / "h.png");
  const auto r = run_sjd_env("trap '' XFSZ; prlimit --fsize=32768", generate_command() + outputs);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("cannot write") && Contains("h.png"));
  CHECK(read_file(dir / "x.png") == "OLD");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
  // Without the limit both are written.
  REQUIRE(run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --heatmap " + quoted(dir / "h.png"))
              .exit_code == 0);
  CHECK(read_file(dir / "x.png") != "OLD");
}

TEST_CASE("a command that fails removes the output folders it made and left empty", "[cli][ux]") {
  TempDir dir("ux_failed_folders");
  write_file(dir / "profile.json", R"({"points": [[1, 2.0]]})");  // no "name": refused once the model is read
  const std::string bad_profile = " --cost-profile " + quoted(dir / "profile.json");
  const auto r = run_sjd(generate_command() + " -o " + quoted(dir / "new" / "sub" / "x.png") + bad_profile);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("profile.json: step-cost profile: missing key \"name\""));
  CHECK_FALSE(std::filesystem::exists(dir / "new"));
  // compare makes --out-dir and its runs/ inside: both go.
  const auto compare = run_sjd("compare --model " + quoted(default_model()) + " -p 'a red apple' --methods ar,sjd" +
                               " --out-dir " + quoted(dir / "c" / "d") + bad_profile);
  CHECK(compare.exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(dir / "c"));
  // A folder that was there stays, and so does one that holds something.
  std::filesystem::create_directories(dir / "kept");
  CHECK(run_sjd(generate_command() + " -o " + quoted(dir / "kept" / "x.png") + bad_profile).exit_code == 2);
  CHECK(std::filesystem::is_directory(dir / "kept"));
}

TEST_CASE("generate ended by a signal removes the output folders it made and left empty", "[cli][ux]") {
  TempDir dir("ux_signalled_folders");
  const auto image = dir / "new" / "sub" / "x.png";
  for (const auto& [signal, number] : {std::pair{"TERM", 15}, std::pair{"INT", 2}}) {
    INFO(signal);
    // The signal comes once the folders are there (made before the model loads, seconds before the image).
    const int status = signal_once_there(generate_command() + " --method ar -o " + quoted(image),
                                         image.parent_path(), signal);
    CHECK(status == 128 + number);
    CHECK_FALSE(std::filesystem::exists(image));
    CHECK_FALSE(std::filesystem::exists(dir / "new"));  // it was: the default action left both folders
  }
}

TEST_CASE("generate refuses image names that are not .png", "[cli][ux]") {
  TempDir dir("ux_output_extension");
  const auto r = run_sjd(generate_command() + " -o " + quoted(dir / "x.jpg"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("'.jpg'"));
  CHECK_FALSE(std::filesystem::exists(dir / "x.jpg"));
  const auto heatmap = run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --heatmap " +
                               quoted(dir / "h.bmp"));
  CHECK(heatmap.exit_code == 2);
  CHECK_THAT(heatmap.err, Contains("--heatmap") && Contains("'.bmp'"));
}

TEST_CASE("tokenize --tokenizer without --kind takes the kind from the file", "[cli][ux]") {
  const auto tokenizer = default_model() / "tokenizer.json";
  const auto with_kind = run_sjd("tokenize --tokenizer " + quoted(tokenizer) + " --kind bpe 'a red apple'");
  REQUIRE(with_kind.exit_code == 0);
  const auto inferred = run_sjd("tokenize --tokenizer " + quoted(tokenizer) + " 'a red apple'");
  INFO(inferred.err);
  CHECK(inferred.exit_code == 0);
  CHECK(inferred.out == with_kind.out);
  // Without a telling name the content decides: a JSON object is a tokenizer.json.
  TempDir dir("ux_tokenizer_kind");
  write_file(dir / "tok", read_file(tokenizer));
  CHECK(run_sjd("tokenize --tokenizer " + quoted(dir / "tok") + " 'a red apple'").out == with_kind.out);
  write_file(dir / "mystery", "neither json nor tiktoken\n");
  const auto unknown = run_sjd("tokenize --tokenizer " + quoted(dir / "mystery") + " 'a red apple'");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("mystery") && Contains("--kind"));
}

TEST_CASE("tokenize without a text says what is missing", "[cli][ux]") {
  const auto r = run_sjd("tokenize --model " + quoted(default_model()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("no text to tokenize"));
  CHECK(r.out.empty());
  // An explicit empty text is a text.
  CHECK(run_sjd("tokenize --model " + quoted(default_model()) + " ''").exit_code == 0);
}

TEST_CASE("output that cannot reach stdout fails the command instead of being lost", "[cli][ux]") {
  // For tokenize and manifest stdout is the whole result; a full disk or a closed stdout gave exit code 0.
  TempDir dir("stdout_lost");
  const std::string tokenize = shell_quoted(build_dir() / "sjd") + " tokenize --model " + quoted(default_model()) +
                               " 'a red circle'";
  const auto run = [&](const std::string& redirect) {
    const int status = std::system((tokenize + " " + redirect + " 2>" + shell_quoted(dir / "err")).c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "err"));
  };
  for (const auto& [redirect, reason] : {std::pair{std::string(">/dev/full"), "No space left on device"},
                                          std::pair{std::string(">&-"), "it is closed"}}) {
    INFO(redirect);
    const auto [code, err] = run(redirect);
    CHECK(code == 1);
    CHECK_THAT(err, Contains(std::string("sjd: error: cannot write to standard output: ") + reason));
  }
  CHECK(run(">/dev/null").first == 0);
}

TEST_CASE("tokenize refuses flags that its other flags would leave unused", "[cli][ux]") {
  TempDir dir("ux_tokenize_flags");
  write_file(dir / "lines.jsonl", "\"a red apple\"\n");
  const std::string model = " --model " + quoted(default_model());
  const std::string lines = " --json-lines " + quoted(dir / "lines.jsonl");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tokenize" + model + " --kind tiktoken 'a cat'", "--tokenizer, --kind and --options go without it"},
      {"tokenize" + model + " --options '{}' 'a cat'", "--tokenizer, --kind and --options go without it"},
      {"tokenize" + model + lines + " 'a cat'", "give a text or --json-lines FILE, not both"},
      {"tokenize" + model + lines + " --template", "--template goes with a text"},
      {"tokenize --kind byte --options '{\"first_id\": 3}' --template 'a cat'", "--template goes with --model"},
      // Ignored before: the file with --kind byte, and the kind or file an option named.
      {"tokenize --kind byte --tokenizer " + quoted(dir / "lines.jsonl") + " 'a cat'", "--kind byte reads no file"},
      {"tokenize --kind byte --options '{\"first_id\": 3, \"kind\": \"spm\"}' 'a cat'",
       "--options: \"kind\" is given by --kind"},
      {"tokenize --kind byte --options '{\"first_id\": 3, \"first_id\": 4}' 'a cat'",
       "--options: key \"first_id\" appears twice"},
      // An unknown option lists the tokenizer's own options, not the keys --kind and --tokenizer give.
      {"tokenize --kind byte --options '{\"first_id\": 3, \"frist\": 4}' 'a cat'",
       "frist: unknown key (this tokenizer's options: first_id)"},
      // An unknown kind was told to give --model or --tokenizer.
      {"tokenize --kind byt --options '{\"first_id\": 4}' ab",
       "--kind byt: unknown tokenizer kind (known: byte, tiktoken, bpe, spm); did you mean 'byte'?"},
  };
  for (const auto& [command, said] : cases) {
    const auto r = run_sjd(command);
    INFO(command << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(said));
    CHECK(r.out.empty());
  }
  CHECK(run_sjd("tokenize" + model + lines).exit_code == 0);
}

TEST_CASE("inspect --logits without --out asks for --out", "[cli][ux]") {
  TempDir dir("ux_inspect");
  write_file(dir / "request.json", R"({"rows": [{"text": "a red apple"}], "window": []})");
  const auto r = run_sjd("inspect --model " + quoted(default_model()) + " --logits " + quoted(dir / "request.json"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("need --out"));
}

TEST_CASE("a mistyped config key or method name gets the closest valid one", "[cli][ux]") {
  TempDir dir("ux_did_you_mean");
  write_file(dir / "c.json", R"({"windw": 8})");
  const auto key = run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --config " + quoted(dir / "c.json"));
  CHECK(key.exit_code == 2);
  CHECK_THAT(key.err, Contains("/windw: unknown key -- did you mean 'window'?"));
  const auto method = run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --method sjd-pak");
  CHECK(method.exit_code == 2);
  CHECK_THAT(method.err, Contains("unknown method 'sjd-pak' -- did you mean 'sjd-pac'?"));
  const auto far = run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --method banana");
  CHECK(far.exit_code == 2);
  CHECK_THAT(far.err, Contains("unknown method 'banana'") && !Contains("did you mean"));
}

TEST_CASE("a mistyped command or flag is named, with the closest valid one, before a missing flag", "[cli][ux]") {
  // CLI11 alone said "A subcommand is required" and "--model is required" here.
  const auto command = run_sjd("generat -p 'a red apple'");
  CHECK(command.exit_code == 2);
  CHECK_THAT(command.err, Contains("unknown command 'generat' -- did you mean 'generate'?"));
  const auto flag = run_sjd("generate --metod ar -p 'a red apple'");
  CHECK(flag.exit_code == 2);
  CHECK_THAT(flag.err, Contains("generate: unknown option '--metod' -- did you mean '--method'?") &&
                           Contains("sjd generate --help"));
  CHECK_THAT(run_sjd("batch --prompt=p.jsonl").err, Contains("did you mean '--prompts'?"));
  const auto far = run_sjd("generate --banana -p 'a red apple'");
  CHECK(far.exit_code == 2);
  CHECK_THAT(far.err, Contains("unknown option '--banana'") && !Contains("did you mean"));
  CHECK_THAT(run_sjd("generate -Z").err, Contains("unknown option '-Z'"));
  CHECK_THAT(run_sjd("generate -qZ").err, Contains("unknown option '-Z'"));  // -q, then -Z
  // A flag given twice, said plainly (CLI11: "--limit: At Most 1 required but received 2").
  const auto twice = run_sjd("compare --model " + quoted(default_model()) + " -p x --limit 1 --limit 2");
  CHECK(twice.exit_code == 2);
  CHECK_THAT(twice.err, Contains("--limit is given 2 times; give it once"));
  const auto help = run_sjd("generate --modle m --help");  // help wins, as in CLI11
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Contains("--model"));
  // Clustered short flags: -q, then -p takes the next word whatever it looks like.
  const auto cluster = run_sjd("generate -qp '-a red apple'");
  CHECK_THAT(cluster.err, !Contains("unknown option") && Contains("--model is required"));
  // CLI11 took "=a red apple" for the prompt.
  const auto equals = run_sjd("generate --model " + quoted(default_model()) + " -p='a red apple'");
  CHECK(equals.exit_code == 2);
  CHECK_THAT(equals.err, Contains("-p takes its value after a space (-p 'a red apple') or an '=' in its long form "
                                  "(--prompt='a red apple')"));
  // A flag's value is its value whatever it looks like, as CLI11 takes it; a negative number is a value.
  const auto value = run_sjd("tokenize --model " + quoted(default_model()) + " --json-lines '-not-a-flag'");
  CHECK_THAT(value.err, !Contains("unknown option"));
  CHECK_THAT(value.err, Contains("-not-a-flag"));
  CHECK_THAT(run_sjd(generate_command() + " --temperature -1").err,
             !Contains("unknown option") && Contains("--temperature"));
}

TEST_CASE("the docs link only to files inside the repository", "[ux][docs]") {
  std::vector<std::filesystem::path> pages = {source_dir() / "README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "docs")) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  const std::regex link(R"(\]\(([^)#\s]+)[^)]*\))");
  const auto root = std::filesystem::weakly_canonical(source_dir());
  for (const auto& page : pages) {
    const std::string text = read_file(page);
    INFO(page.string());
    CHECK(text.find("shared/docs") == std::string::npos);  // the team's notes are not part of the project
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1];
      if (target.find("://") != std::string::npos) continue;  // a web address
      const auto resolved = std::filesystem::weakly_canonical(page.parent_path() / target);
      INFO(target);
      CHECK(resolved.string().rfind(root.string(), 0) == 0);
    }
  }
}

namespace {

std::string compare_command(const std::filesystem::path& out_dir) {
  return "compare --model " + quoted(default_model()) + " -p 'a red apple' --methods ar,sjd --seeds 2 --out-dir " +
         quoted(out_dir);
}

}  // namespace

TEST_CASE("compare writes each run's image and row, and a re-run resumes", "[cli][ux][compare]") {
  TempDir dir("ux_compare_runs");
  const auto out = dir / "out";
  const auto r = run_sjd(compare_command(out));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find('\r') == std::string::npos);  // no progress line off a terminal
  const auto report = read_json(out / "compare.json");
  REQUIRE(report["runs"].size() == 4);  // prompt x 2 seeds x 2 methods
  for (const auto& run : report["runs"]) {
    INFO(run.dump());
    CHECK(std::filesystem::is_regular_file(out / run["image"].get<std::string>()));
    CHECK(run["steps"].get<int64_t>() > 0);
    CHECK(run["step_compression"].get<double>() >= 1.0);
    CHECK(run["seconds"].get<double>() > 0.0);
    CHECK(run["resumed"] == false);
  }
  CHECK(report["runs"][1]["entry"] == "sjd");
  CHECK(report["runs"][2]["seed"] == 1);
  CHECK(report["methods"][0]["accepted_length_share"][1] == 1.0);  // ar commits one token a step

  // The same command again: nothing is made, the recorded figures are reused.
  const auto again = run_sjd(compare_command(out));
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Contains("4 of 4 runs were already done"));
  CHECK_THAT(again.out, Contains("; 0 of the 4 images in ") && Contains(" made now"));  // it said "wrote ... 4 images"
  const auto resumed = read_json(out / "compare.json");
  CHECK(resumed["methods"] == report["methods"]);
  for (const auto& run : resumed["runs"]) CHECK(run["resumed"] == true);

  // A missing image is made again; other settings are refused.
  std::filesystem::remove(out / report["runs"][3]["image"].get<std::string>());
  const auto partly = run_sjd(compare_command(out));
  REQUIRE(partly.exit_code == 0);
  CHECK_THAT(partly.out, Contains("3 of 4 runs were already done"));
  const auto other = run_sjd(compare_command(out) + " --cfg 3");
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.err, Contains("manifest.jsonl") && Contains("cfg 1.25 (now 3.0)"));  // the bundle says 1.25
  // Earlier runs are found by what they are, not by their place: another order of --methods, one more method
  // and one more seed make only the runs not recorded, each into a file of its own.
  const auto wider = run_sjd("compare --model " + quoted(default_model()) +
                             " -p 'a red apple' --methods sjd,jacobi,ar --seeds 3 --quiet --out-dir " + quoted(out));
  INFO(wider.err);
  REQUIRE(wider.exit_code == 0);
  CHECK_THAT(wider.out, Contains("4 of 9 runs were already done"));
  const auto widened = read_json(out / "compare.json");
  REQUIRE(widened["runs"].size() == 9);
  std::map<std::string, double> earlier_seconds;  // "entry seed" -> the first command's figure
  for (const auto& run : report["runs"]) {
    earlier_seconds[run["entry"].get<std::string>() + " " + run["seed"].dump()] = run["seconds"].get<double>();
  }
  std::set<std::string> images;
  for (const auto& run : widened["runs"]) {
    INFO(run.dump());
    const auto earlier = earlier_seconds.find(run["entry"].get<std::string>() + " " + run["seed"].dump());
    CHECK(run["resumed"] == (earlier != earlier_seconds.end()));
    if (earlier != earlier_seconds.end() && run["image"] != report["runs"][3]["image"]) {  // [3] was made again
      CHECK(run["seconds"].get<double>() == earlier->second);
    }
    images.insert(run["image"].get<std::string>());
    CHECK(std::filesystem::is_regular_file(out / run["image"].get<std::string>()));
  }
  CHECK(images.size() == 9);
  CHECK(widened["runs"][0]["entry"] == "sjd");
  // The first command's runs are all still there; a run of the same method and seed made with other settings is
  // still refused, saying what differs.
  const auto narrower = run_sjd(compare_command(out));
  REQUIRE(narrower.exit_code == 0);
  CHECK_THAT(narrower.out, Contains("4 of 4 runs were already done"));
  const auto other_window = run_sjd("compare --model " + quoted(default_model()) +
                                    " -p 'a red apple' --methods jacobi --seeds 1 --window 3 --out-dir " + quoted(out));
  CHECK(other_window.exit_code == 2);
  CHECK_THAT(other_window.err, Contains("window \"auto\" (now 3)") && Contains("the same settings and bundle"));
  // ...but ar, which takes no window, is the same run with one.
  const auto ar_window = run_sjd("compare --model " + quoted(default_model()) +
                                 " -p 'a red apple' --methods ar --seeds 1 --window 3 --out-dir " + quoted(out));
  INFO(ar_window.err);
  CHECK(ar_window.exit_code == 0);
  CHECK_THAT(ar_window.out, Contains("1 of 1 runs were already done"));

  // batch and compare refuse each other's folders, before the model loads.
  write_file(dir / "p.txt", "a red apple\n");
  const auto batch_in_compare = run_sjd(batch_args(dir / "p.txt", out));
  CHECK(batch_in_compare.exit_code == 2);
  CHECK_THAT(batch_in_compare.err, Contains("holds a compare run (compare.json, runs/): give batch its own --out-dir"));
  REQUIRE(run_sjd(batch_args(dir / "p.txt", dir / "b") + " --quiet").exit_code == 0);
  const auto compare_in_batch = run_sjd(compare_command(dir / "b"));
  CHECK(compare_in_batch.exit_code == 2);
  CHECK_THAT(compare_in_batch.err, Contains("holds a batch run (manifest.jsonl, batch.json): give compare its own"));
  // Nor does one go into the other's runs/ folder: there a batch counted compare's images as its own and wrote its
  // lines into compare's manifest (exit code 0).
  const auto batch_in_runs = run_sjd(batch_args(dir / "p.txt", out / "runs"));
  CHECK(batch_in_runs.exit_code == 2);
  CHECK_THAT(batch_in_runs.err, Contains("is the runs/ folder of a compare run"));
  // compare.json is written at a compare's end: one still running (here: its table removed) is told by its lines.
  std::filesystem::rename(out / "compare.json", dir / "compare.json.kept");
  const auto batch_in_running = run_sjd(batch_args(dir / "p.txt", out / "runs"));
  CHECK(batch_in_running.exit_code == 2);
  CHECK_THAT(batch_in_running.err, Contains("is the runs/ folder of a compare run"));
  std::filesystem::rename(dir / "compare.json.kept", out / "compare.json");
  REQUIRE(run_sjd(batch_args(dir / "p.txt", dir / "c" / "runs") + " --quiet").exit_code == 0);
  const auto compare_over_batch = run_sjd(compare_command(dir / "c"));
  CHECK(compare_over_batch.exit_code == 2);
  CHECK_THAT(compare_over_batch.err, Contains("holds a batch run (batch.json), where compare keeps its runs"));
}

TEST_CASE("batch and compare refuse an input that is a PNG where their images go", "[cli][ux][compare]") {
  // An image's name comes from its prompt: a prompt file named as the image of its own first line was replaced by
  // that image (exit code 0), and so was a config.
  TempDir dir("input_png");
  const std::filesystem::path batch_dir = dir / "b", runs = dir / "c" / "runs";
  std::filesystem::create_directories(batch_dir);
  std::filesystem::create_directories(runs);
  write_file(batch_dir / "00000_a-red-apple.png", "a red apple\n");
  const auto batch = run_sjd(batch_args(batch_dir / "00000_a-red-apple.png", batch_dir));
  CHECK(batch.exit_code == 2);
  CHECK_THAT(batch.err, Contains("--prompts names") && Contains("where the run writes its images"));
  CHECK(read_file(batch_dir / "00000_a-red-apple.png") == "a red apple\n");
  write_file(runs / "00000_ar_seed0.png", "a red apple\n");
  const auto compare = run_sjd("compare --model " + quoted(default_model()) + " --prompts " +
                               quoted(runs / "00000_ar_seed0.png") + " --methods ar --out-dir " + quoted(dir / "c"));
  CHECK(compare.exit_code == 2);
  CHECK_THAT(compare.err, Contains("where the run writes its images"));
  CHECK(read_file(runs / "00000_ar_seed0.png") == "a red apple\n");
  // A prompt file beside the images that is not a PNG is fine.
  write_file(batch_dir / "prompts.txt", "a red apple\n");
  CHECK(run_sjd(batch_args(batch_dir / "prompts.txt", batch_dir) + " --quiet").exit_code == 0);
}

TEST_CASE("compare refuses a table or figure it could not write, and its own record as --prompts, before any run",
          "[cli][ux][compare]") {
  // A link at compare.png was found after every image was made (and a new compare.json written beside it); a
  // --prompts of the folder's runs/manifest.jsonl had its records appended to it.
  TempDir dir("ux_compare_outputs");
  const auto out = dir / "out";
  std::filesystem::create_directories(out);
  write_file(dir / "elsewhere.txt", "kept");
  std::filesystem::create_symlink(dir / "elsewhere.txt", out / "compare.png");
  const auto linked = run_sjd(compare_command(out));
  CHECK(linked.exit_code == 2);
  CHECK_THAT(linked.err, Contains("compare.png") && Contains("symbolic link"));
  CHECK_FALSE(std::filesystem::exists(out / "runs"));
  CHECK_FALSE(std::filesystem::exists(out / "compare.json"));
  CHECK(read_file(dir / "elsewhere.txt") == "kept");

  std::filesystem::create_directories(dir / "c" / "runs");
  write_file(dir / "c" / "runs" / "manifest.jsonl", "{\"prompt\": \"a red apple\"}\n");
  const auto own =
      run_sjd("compare --model " + quoted(default_model()) + " --prompts " +
              quoted(dir / "c" / "runs" / "manifest.jsonl") + " --methods ar --out-dir " + quoted(dir / "c"));
  CHECK(own.exit_code == 2);
  CHECK_THAT(own.err, Contains("--prompts") && Contains("runs/manifest.jsonl"));
  CHECK(read_file(dir / "c" / "runs" / "manifest.jsonl") == "{\"prompt\": \"a red apple\"}\n");
}

TEST_CASE("compare makes a damaged run's image again into its own file, and warns no more", "[cli][ux][compare]") {
  // Made again under a new index, the damaged file stayed, another run took its index, and every later
  // command warned about it.
  TempDir dir("ux_compare_damaged");
  const auto out = dir / "out";
  const std::string compare = "compare --model " + quoted(default_model()) + " -p 'a red apple' --seeds 1 --quiet " +
                              "--out-dir " + quoted(out) + " --methods ";
  REQUIRE(run_sjd(compare + "ar,sjd").exit_code == 0);
  const auto damaged = out / "runs" / "00001_sjd_seed0.png";
  REQUIRE(std::filesystem::is_regular_file(damaged));
  const std::string made = read_file(damaged);
  write_file(damaged, made.substr(0, made.size() / 2));
  const auto again = run_sjd(compare + "ar,jacobi,sjd");
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, Contains("00001_sjd_seed0.png is missing or damaged"));
  CHECK(read_file(damaged) == made);  // the same run, so the same bytes, in its own file
  const auto report = read_json(out / "compare.json");
  std::set<std::string> images;
  for (const auto& run : report["runs"]) images.insert(run["image"].get<std::string>());
  CHECK(images.size() == 3);
  const auto quiet = run_sjd(compare + "ar,jacobi,sjd");
  INFO(quiet.err);
  REQUIRE(quiet.exit_code == 0);
  CHECK_THAT(quiet.out, Contains("3 of 3 runs were already done"));
  CHECK(quiet.err.find("damaged") == std::string::npos);
}

TEST_CASE("compare: a manifest line whose index would overflow is ignored, and its run made once more", "[cli][ux][compare]") {
  TempDir dir("ux_compare_index");
  const auto out = dir / "out";
  REQUIRE(run_sjd(compare_command(out)).exit_code == 0);
  const auto manifest = out / "runs" / "manifest.jsonl";
  std::string lines = read_file(manifest);
  const size_t at = lines.find("\"index\":3");
  REQUIRE(at != std::string::npos);
  lines.replace(at, 9, "\"index\":9223372036854775807");
  write_file(manifest, lines);
  // The next free index was 2^63 - 1 + 1: a negative file name, and the run made again on every resume.
  const auto first = run_sjd(compare_command(out));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.err, Contains("\"index\" is not an integer from 0 to 2^48; line ignored"));
  CHECK_THAT(first.out, Contains("3 of 4 runs were already done"));
  for (const auto& entry : std::filesystem::directory_iterator(out / "runs")) {
    CHECK(entry.path().filename().string().find('-') != 0);
  }
  CHECK_THAT(run_sjd(compare_command(out)).out, Contains("4 of 4 runs were already done"));
}

TEST_CASE("compare: a first stop signal finishes the run in flight, writes no table, and a re-run completes it",
          "[cli][ux][compare]") {
  TempDir dir("ux_compare_stop");
  const auto out = dir / "c";
  const std::string args = "compare --model " + quoted(default_model()) +
                           " -p 'a red apple' --methods ar,sjd --seeds 3 --quiet --out-dir " + quoted(out);
  const int code = signal_after_manifest_lines("OMP_NUM_THREADS=1 " + (build_dir() / "sjd").string() + " " + args +
                                                   " >" + quoted(dir / "a.out") + " 2>" + quoted(dir / "a.err"),
                                               out / "runs" / "manifest.jsonl", 0, "TERM");
  const std::string said = read_file(dir / "a.out");
  INFO(said << read_file(dir / "a.err"));
  CHECK(code == 128 + 15);
  std::smatch made;
  REQUIRE(std::regex_search(said, made, std::regex(R"(compare: stopped by SIGTERM with (\d) of 6 runs made; the same )"
                                                   R"(command makes the rest and writes the table and figure)")));
  const int runs = std::stoi(made[1]);
  CHECK(runs >= 1);
  CHECK(runs < 6);
  CHECK(manifest_records(out / "runs" / "manifest.jsonl").size() == static_cast<size_t>(runs));
  CHECK(!std::filesystem::exists(out / "compare.json"));
  const auto rest = run_sjd(args);
  INFO(rest.err);
  CHECK(rest.exit_code == 0);
  CHECK_THAT(rest.out, Contains(std::to_string(runs) + " of 6 runs were already done"));
  CHECK(std::filesystem::exists(out / "compare.json"));
}

TEST_CASE("compare and generate show a progress line on a terminal, unless --quiet", "[cli][ux][progress]") {
  TempDir dir("ux_progress");
  const auto shown = run_sjd_on_terminal(compare_command(dir / "c"));
  INFO(shown.out);
  REQUIRE(shown.exit_code == 0);
  CHECK_THAT(shown.out, Contains("\r[4/4] sjd, seed 1, prompt 1/1"));
  CHECK_THAT(shown.out, Contains("ETA"));
  const auto generate = generate_command() + " --method sjd -o " + quoted(dir / "x.png");
  const auto line = run_sjd_on_terminal(generate);
  INFO(line.out);
  REQUIRE(line.exit_code == 0);
  CHECK(std::regex_search(line.out, std::regex(R"(\rtokens 1061/1061  steps \d+  [0-9.]+ tokens/step  \d+ tokens/s  ETA 0s)")));
  const auto quiet = run_sjd_on_terminal(generate + " --quiet");
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.out.find("tokens/s") == std::string::npos);
  CHECK_THAT(quiet.out, Contains("wrote"));
  const auto piped = run_sjd(generate);
  CHECK(piped.err.find("tokens/s") == std::string::npos);
}

TEST_CASE("a missing font fails before any work, naming what to install", "[cli][ux][figure]") {
  TempDir dir("ux_font");
  const auto r = run_sjd_env("SJD_FONT=/nonexistent/font.ttf", compare_command(dir / "c"));
  CHECK(r.exit_code == 2);  // the user's setting, named: bad input
  CHECK_THAT(r.err, Contains("SJD_FONT=/nonexistent/font.ttf"));
  CHECK_FALSE(std::filesystem::exists(dir / "c"));
  const auto heatmap = run_sjd_env("SJD_FONT=/nonexistent/font.ttf", generate_command() + " -o " +
                                   quoted(dir / "x.png") + " --heatmap " + quoted(dir / "h.png"));
  CHECK(heatmap.exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(dir / "x.png"));
  const auto folder = run_sjd_env("SJD_FONT=" + dir.path().string(), compare_command(dir / "c"));
  CHECK(folder.exit_code == 2);
  CHECK_THAT(folder.err, Contains("SJD_FONT=" + dir.path().string() + ": a folder, not a font file"));
}

TEST_CASE("generate --heatmap-view draws the map beside the image, over it, or alone, with a colour bar", "[cli][ux][heatmap]") {
  TempDir dir("ux_heatmap_view");
  std::map<std::string, at::Tensor> views;
  for (const std::string view : {"side", "blend", "map"}) {
    const auto file = dir / (view + ".png");
    const auto r = run_sjd(generate_command() + " --method sjd -o " + quoted(dir / "x.png") + " --heatmap " +
                           quoted(file) + " --heatmap-view " + view);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    views[view] = sjd::io::read_png_rgb(file);
  }
  CHECK(views["side"].size(1) > views["map"].size(1) + 200);  // the image panel beside the map
  CHECK(views["blend"].sizes() == views["map"].sizes());
  CHECK_FALSE(at::equal(views["blend"], views["map"]));        // the image shows through
  // The colour bar runs from the first step's colour (dark blue) to the last's (yellow).
  const auto has = [](const at::Tensor& image, int r, int g, int b) {
    return image.eq(at::tensor({r, g, b}, at::kByte)).all(-1).any().item<bool>();
  };
  CHECK(has(views["blend"], 0, 20, 200));
  CHECK(has(views["blend"], 255, 240, 40));
  // A relaxed run's map names its method in the figures' red (an exact one's in grey), and its text chunks
  // name the run as the image's do.
  const auto red_pixels = [](const at::Tensor& image) {
    const at::Tensor c = image.to(at::kInt);
    return (c.select(-1, 0).gt(150) & c.select(-1, 1).lt(100) & c.select(-1, 2).lt(100)).sum().item<int64_t>();
  };
  CHECK(red_pixels(views["map"]) == 0);
  const auto lossy = run_sjd(generate_command() + " --method sjd:uniform -o " + quoted(dir / "x.png") +
                             " --heatmap " + quoted(dir / "lossy.png") + " --heatmap-view map");
  REQUIRE(lossy.exit_code == 0);
  CHECK(red_pixels(sjd::io::read_png_rgb(dir / "lossy.png")) > 100);
  std::map<std::string, std::string> chunks;
  for (const auto& [key, value] : sjd::io::read_png_text(dir / "lossy.png")) chunks[key] = value;
  CHECK(chunks["exactness"] == "lossy");
  CHECK_THAT(chunks["method"], Contains("uniform"));
  CHECK(chunks["seed"] == "1");
  CHECK_FALSE(chunks["prompt"].empty());
  const auto bad = run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --heatmap-view over");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("'over'") && Contains("side"));
  const auto alone = run_sjd(generate_command() + " -o " + quoted(dir / "x.png") + " --heatmap-view map");
  CHECK(alone.exit_code == 2);  // it was ignored without a word
  CHECK_THAT(alone.err, Contains("--heatmap-view draws the map of --heatmap FILE.png"));
  const auto limit = run_sjd("compare --model " + quoted(default_model()) + " -p 'a cat' --limit 5 --out-dir " +
                             quoted(dir / "c"));
  CHECK(limit.exit_code == 2);
  CHECK_THAT(limit.err, Contains("--limit N takes the first N of --prompts FILE"));
}

TEST_CASE("settings a run ignores get a note line each, and compare says it ignores --method", "[cli][ux]") {
  TempDir dir("ux_notes");
  const auto r = run_sjd(generate_command() + " --method ar --window 4 --pd-k 2 --quiet -o " + quoted(dir / "a.png"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("sjd: note: ar decodes one token a step, so window 4 is ignored\n"
                             "sjd: note: only sjd-pac grows draft trees, so pd_k is ignored by ar\n"));
  const auto c = run_sjd("compare --model " + quoted(default_model()) + " -p 'a red circle' --method sjd --methods ar" +
                         " --quiet --out-dir " + quoted(dir / "c"));
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.err, Contains("note: compare runs the methods of --methods, so --method sjd is ignored"));
  // A relaxation comes with the method that names it: --method sjd after a config's sjd-pac:cool is plain sjd.
  write_file(dir / "cool.json", R"({"method": "sjd-pac:cool"})");
  const auto plain = run_sjd(generate_command() + " --config " + quoted(dir / "cool.json") + " --method ar --quiet -o " +
                             quoted(dir / "p.png"));
  INFO(plain.err);
  CHECK(plain.exit_code == 0);
  CHECK_THAT(plain.out, Contains("method ar [exact]"));
  const auto relax_flag = run_sjd("compare --model " + quoted(default_model()) + " -p 'a red circle' --methods sjd" +
                                  " --relax cool --quiet --out-dir " + quoted(dir / "r"));
  CHECK(relax_flag.exit_code == 2);
  CHECK_THAT(relax_flag.err, Contains("compare takes each method's relaxation from its --methods entry"));
  const auto quiet = run_sjd(generate_command() + " --method sjd --window 4 --quiet -o " + quoted(dir / "s.png"));
  CHECK(quiet.err.find("note:") == std::string::npos);
  // The default model's bundle sets temperature 0.8: jacobi notes a temperature only when the user gave one.
  const auto jacobi = run_sjd(generate_command() + " --method jacobi --quiet -o " + quoted(dir / "j.png"));
  CHECK(jacobi.exit_code == 0);
  CHECK(jacobi.err.find("note:") == std::string::npos);
  const auto given = run_sjd(generate_command() + " --method jacobi --temperature 0.5 --quiet -o " + quoted(dir / "j.png"));
  CHECK_THAT(given.err, Contains("note: jacobi decodes greedily (argmax), so temperature 0.5 is ignored"));
  // A step-cost profile the note calls ignored is not read: a missing or malformed one failed the run after it.
  write_file(dir / "empty_profile.json", "{}");
  for (const auto& [method, profile] : {std::pair{std::string("ar"), dir / "missing.json"},
                                        std::pair{std::string("sjd --window 4"), dir / "empty_profile.json"}}) {
    const auto ignored = run_sjd(generate_command() + " --method " + method + " --cost-profile " + quoted(profile) +
                                 " -o " + quoted(dir / "i.png"));
    INFO(ignored.err);
    CHECK(ignored.exit_code == 0);
    CHECK_THAT(ignored.err, Contains("is ignored"));
  }
  const auto read = run_sjd(generate_command() + " --cost-profile " + quoted(dir / "empty_profile.json") + " -o " +
                            quoted(dir / "i.png"));
  CHECK(read.exit_code == 2);  // automatic windows read it
  CHECK_THAT(read.err, Contains("empty_profile.json: step-cost profile"));
}

TEST_CASE("a prompt that runs past the model's trained positions gets a warning, and the image is still made",
          "[cli][ux]") {
  // The default model: 2048 positions (layout.max_positions), 1061 image tokens; this prompt takes 1141.
  std::string long_prompt;
  for (int i = 0; i < 160; ++i) long_prompt += (i > 0 ? " " : "") + std::string("a large red triangle on the left");
  TempDir dir("ux_positions");
  const std::string model = " --model " + quoted(default_model()) + " --method ar --quiet";
  const auto r = run_sjd("generate" + model + " -p '" + long_prompt + "' -o " + quoted(dir / "long.png"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("sjd: warning: the prompt takes 1141 tokens and the image 1061, 154 past the 2048 "
                             "positions the model was trained for") &&
                        Contains("layout.max_positions"));
  CHECK(std::filesystem::exists(dir / "long.png"));
  const auto fits = run_sjd("generate" + model + " -p 'a red circle' -o " + quoted(dir / "short.png"));
  CHECK(fits.exit_code == 0);
  CHECK_THAT(fits.err, !Contains("warning"));
  // batch names the prompt's line, once, and makes both images.
  write_file(dir / "p.jsonl", "{\"prompt\": \"a red circle\"}\n{\"prompt\": \"" + long_prompt + "\"}\n");
  const auto b = run_sjd("batch" + model + " --prompts " + quoted(dir / "p.jsonl") + " --out-dir " + quoted(dir / "b"));
  INFO(b.err);
  CHECK(b.exit_code == 0);
  CHECK_THAT(b.err, Contains("warning: prompt 1 (" + (dir / "p.jsonl").string() + ":2): the prompt takes 1141"));
  CHECK(b.err.find("warning") == b.err.rfind("warning"));
  CHECK_THAT(read_file(dir / "b" / "manifest.jsonl"), !Contains("failed"));
  CHECK_THAT(run_sjd("inspect --model " + quoted(default_model())).out,
             Contains("1061 generated tokens per image (trained for 2048 positions: prompts up to 987 tokens "
                      "with the template, as tokenize --template counts them)"));
}

TEST_CASE("a prompt that alone fills the model's trained positions is refused, in a batch on its own line",
          "[cli][ux][robustness]") {
  // 300 copies take more than the 2048 positions (layout.max_positions); its prefill alone used to run for
  // minutes before making noise.
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += (i > 0 ? " " : "") + std::string("a large red triangle on the left");
  TempDir dir("ux_positions_full");
  const std::string model = " --model " + quoted(default_model()) + " --method ar --quiet";
  const auto r = run_sjd("generate" + model + " -p '" + long_prompt + "' -o " + quoted(dir / "long.png"));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("tokens, at least the 2048 positions the model was trained for") &&
                        Contains("layout.max_positions), which leaves none for the image: shorten the prompt") &&
                        !Contains("warning"));
  CHECK_FALSE(std::filesystem::exists(dir / "long.png"));
  write_file(dir / "p.jsonl", "{\"prompt\": \"" + long_prompt + "\"}\n{\"prompt\": \"a red circle\"}\n");
  const auto b = run_sjd("batch" + model + " --prompts " + quoted(dir / "p.jsonl") + " --out-dir " + quoted(dir / "b"));
  INFO(b.err);
  CHECK(b.exit_code == 1);  // one image failed
  const auto records = manifest_records(dir / "b" / "manifest.jsonl");
  REQUIRE(records.size() == 2);
  for (const auto& record : records) {
    const bool is_long = record["index"] == 0;
    CHECK(record["status"] == (is_long ? "failed" : "ok"));
    if (is_long) CHECK_THAT(record["error"].get<std::string>(), Contains("which leaves none for the image"));
  }
}
