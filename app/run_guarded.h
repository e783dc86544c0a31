#pragma once
// How a subcommand ends: every exception becomes one line on stderr and an exit code.
#include <functional>

namespace sjd::app {

// Runs a subcommand body, turning exceptions into a one-line reason on stderr
// and an exit code: 2 for bad input (files, JSON, values), 1 otherwise. A run
// that fails removes the output folders it created and left empty.
int run_guarded(const std::function<int()>& body);

// The exit code of the subcommand that ran (set by its callback).
int& command_exit_code();

}  // namespace sjd::app
