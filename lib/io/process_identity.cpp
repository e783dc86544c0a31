#include "io/process_identity.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sjd::io {
namespace {

struct ProcessState {
  uint64_t start_ticks = 0;
  bool zombie = false;
};

// Fields 3 (state) and 22 (start time) of /proc/PID/stat.
std::optional<ProcessState> process_state(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const size_t name_end = line.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(name_end + 1));
  std::string state, field;
  fields >> state;
  for (int i = 4; i < 22; ++i) fields >> field;  // fields 4 to 21: not needed
  ProcessState result;
  if (!(fields >> result.start_ticks)) return std::nullopt;
  result.zombie = state == "Z" || state == "X";
  return result;
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

std::string pid_namespace() {
  std::error_code error;
  const std::string link = std::filesystem::read_symlink("/proc/self/ns/pid", error).string();  // "pid:[N]"
  const size_t open = link.find('['), close = link.find(']');
  if (error || open == std::string::npos || close == std::string::npos || close < open) return "";
  return link.substr(open + 1, close - open - 1);
}

std::optional<uint64_t> process_start_ticks(int64_t pid) {
  const std::optional<ProcessState> state = process_state(pid);
  if (!state) return std::nullopt;
  return state->start_ticks;
}

bool process_running(int64_t pid, std::optional<uint64_t> started) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  const std::optional<ProcessState> state = process_state(pid);
  if (!state) return true;  // no /proc to ask: kill() said it exists
  if (state->zombie) return false;
  return !started || *started == state->start_ticks;
}

}  // namespace sjd::io
