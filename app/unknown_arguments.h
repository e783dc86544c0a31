#pragma once
// A mistyped command or flag, named with the nearest known spelling before CLI11
// parses. CLI11 reports a missing required flag before an unknown one
// (`generate --modle m` said "--model is required") and a mistyped command as "A
// subcommand is required", neither of which points at the typing slip.
#include <CLI/CLI.hpp>

#include <string>

namespace sjd::app {

// The first word of argv that names no command of `app` or no flag of its command, as one
// line ("generate: unknown option '--metod' -- did you mean '--method'? ..."); empty when
// every word is known, leaving the rest (values, counts, required flags) to CLI11. A flag's
// own values are skipped as CLI11 takes them, so `-p "-a prompt"` (or `-qp "-a prompt"`) is not
// read as a flag. A short flag written "-p=value" is refused too: CLI11 would take "=value" as its value.
std::string unknown_argument_problem(CLI::App& app, int argc, const char* const* argv);

// CLI11's message for a parse error, with its wording for a flag given twice ("--seed: At Most 1 required
// but received 2") said plainly: "--seed is given 2 times; give it once".
std::string parse_error_text(const CLI::ParseError& error);

}  // namespace sjd::app
