#include "cli_runner.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>

#include "testing/test_support.h"

namespace sjd::testing {

namespace {

// Runs a shell command with its stdout and stderr captured.
CommandResult run_shell(const std::string& shell_command) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const auto tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const auto out = dir / ("sjd_cli_" + tag + ".out");
  const auto err = dir / ("sjd_cli_" + tag + ".err");
  const std::string command = shell_command + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(command.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

CommandResult run_command(const std::string& prefix, const std::string& args) {
  return run_shell(prefix + (build_dir() / "sjd").string() + " " + args);
}

// Starts `command` in the background of a bash with job control, waits while the shell test `waiting` holds
// and the process runs, sends it `signals` 0.3 s apart and returns its exit status as the shell reports it.
int signal_when(const std::string& command, const std::string& waiting, const std::string& signals) {
  const std::string script = "set -m; " + command + " & pid=$!; " + "while " + waiting +
                             " && kill -0 $pid; do sleep 0.05; done; " + "for s in " + signals +
                             "; do kill -$s $pid; sleep 0.3; done; wait $pid";
  const int status = std::system(("bash -c '" + std::regex_replace(script, std::regex("'"), "'\\''") + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

CommandResult run_sjd(const std::string& args) { return run_command("", args); }

int signal_after_manifest_lines(const std::string& sjd_command, const std::filesystem::path& manifest, int lines,
                                const std::string& signals) {
  const std::string count = "$(cat " + shell_quoted(manifest) + " 2>/dev/null | wc -l)";
  return signal_when(sjd_command, "[ " + count + " -le " + std::to_string(lines) + " ]", signals);
}

int signal_once_there(const std::string& args, const std::filesystem::path& path, const std::string& signal) {
  return signal_when((build_dir() / "sjd").string() + " " + args + " >/dev/null 2>&1",
                     "[ ! -e " + shell_quoted(path) + " ]", signal);
}

CommandResult run_sjd_env(const std::string& environment, const std::string& args) {
  return run_command(environment + " ", args);
}

CommandResult run_sjd_limited(const std::string& args, int memory_mb, int seconds) {
  const int64_t cap_kb = (memory_mb + own_address_space_mb()) * int64_t{1024};
  return run_command("ulimit -v " + std::to_string(cap_kb) + "; timeout " + std::to_string(seconds) + " ", args);
}

int64_t own_address_space_mb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) / 1024;  // the line is in kB
  }
  return 0;
}

CommandResult run_sjd_on_terminal(const std::string& args) {
  static int counter = 0;
  const auto tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  // The command goes in a file, so `args` needs no second level of shell quoting.
  const auto script = std::filesystem::temp_directory_path() / ("sjd_tty_" + tag + ".sh");
  write_file(script, "OMP_NUM_THREADS=1 exec " + (build_dir() / "sjd").string() + " " + args + "\n");
  CommandResult r = run_shell("script -qec 'sh " + script.string() + "' /dev/null </dev/null");
  std::filesystem::remove(script);
  return r;
}

std::filesystem::path default_model() { return source_dir() / "models" / "default"; }

std::filesystem::path default_model_copy(const std::filesystem::path& folder, const std::string& name,
                                         const std::function<void(nlohmann::json&)>& edit) {
  const auto copy = folder / name;
  std::filesystem::copy(default_model(), copy, std::filesystem::copy_options::recursive);
  if (edit) {
    auto j = nlohmann::json::parse(read_file(copy / "bundle.json"));
    edit(j);
    write_file(copy / "bundle.json", j.dump(2));
  }
  return copy;
}

std::string shell_quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

std::vector<nlohmann::json> manifest_records(const std::filesystem::path& manifest) {
  std::vector<nlohmann::json> records;
  std::ifstream in(manifest);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) { return a["index"] < b["index"]; });
  return records;
}

std::string batch_args(const std::filesystem::path& prompts, const std::filesystem::path& out) {
  return "batch --model " + shell_quoted(default_model()) + " --prompts " + shell_quoted(prompts) + " --out-dir " +
         shell_quoted(out);
}

}  // namespace sjd::testing
