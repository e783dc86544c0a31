#pragma once
// Runs the built `sjd` program as a user would, capturing exit code and output.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace sjd::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is appended to the path of build/sjd; stdout/stderr go to temp files.
CommandResult run_sjd(const std::string& args);

// run_sjd under an address-space cap (ulimit -v) and a time limit, so a
// regression that allocates without bound or hangs fails the test instead of
// eating the machine: exit code 124 is a timeout. The cap is memory_mb above
// what this test program maps (own_address_space_mb), since sjd maps the same
// Torch libraries before it allocates anything: about 0.5 GB in a CPU build,
// 2.7 GB in a CUDA one, which would not even load under a cap of 1.5 GB.
CommandResult run_sjd_limited(const std::string& args, int memory_mb = 1500, int seconds = 600);
// This process's address space (VmSize) in MB.
int64_t own_address_space_mb();

// Starts sjd with `args` in the background (as signal_after_manifest_lines does), waits until `path` exists,
// sends the process `signal` ("TERM") and returns its exit status as the shell reports it (128 + the
// signal's number when the signal ended it).
int signal_once_there(const std::string& args, const std::filesystem::path& path, const std::string& signal);

// run_sjd with environment assignments before the program ("OMP_NUM_THREADS=1").
CommandResult run_sjd_env(const std::string& environment, const std::string& args);

// run_sjd with stdout and stderr on a pseudo-terminal (util-linux `script`), as a
// person at a terminal sees it: both streams arrive together in `out`.
CommandResult run_sjd_on_terminal(const std::string& args);

// Starts `sjd_command` (a shell command line) in the background of a bash with job control, waits
// until `manifest` has more than `lines` lines, sends the process `signals` (e.g. "TERM", or "INT INT"
// a moment apart) and returns its exit status as the shell reports it. Job control keeps SIGINT as
// it was: a non-interactive shell's background jobs start ignoring it, and dash cannot turn job
// control on without a terminal.
int signal_after_manifest_lines(const std::string& sjd_command, const std::filesystem::path& manifest, int lines,
                                const std::string& signals);

// The bundled default model.
std::filesystem::path default_model();

// A copy of the default model at `folder / name`, with `edit` applied to its bundle.json.
std::filesystem::path default_model_copy(const std::filesystem::path& folder, const std::string& name,
                                         const std::function<void(nlohmann::json&)>& edit = {});

// A path in single quotes, for a shell command line.
std::string shell_quoted(const std::filesystem::path& path);

// The records of a batch manifest (JSON lines) in index order (a batch appends them as images finish).
std::vector<nlohmann::json> manifest_records(const std::filesystem::path& manifest);

// "batch --model <default> --prompts P --out-dir OUT" (arguments of sjd).
std::string batch_args(const std::filesystem::path& prompts, const std::filesystem::path& out);

}  // namespace sjd::testing
