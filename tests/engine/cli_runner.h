#pragma once
// Runs the built `sjd` program as a user would, capturing exit code and output.
#include <filesystem>
#include <string>

namespace sjd::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is appended to the path of build/sjd; stdout/stderr go to temp files.
CommandResult run_sjd(const std::string& args);

// The bundled default model.
std::filesystem::path default_model();

}  // namespace sjd::testing
