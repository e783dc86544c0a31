#pragma once
// Who a process is, for files that several processes share (batch claims, temporary files): which
// machine and pid namespace it runs in, and whether a process recorded there earlier still runs.
#include <cstdint>
#include <optional>
#include <string>

namespace sjd::io {

// This machine's host name ("unknown" when it has none).
std::string host_name();

// This process's pid namespace ("4026531836"), or "" without /proc: two containers on one machine
// may share a host name, and a pid means something only inside its namespace.
std::string pid_namespace();

// When process `pid` (of this namespace) started, in clock ticks since boot; nullopt when there is
// no such process or no /proc to ask.
std::optional<uint64_t> process_start_ticks(int64_t pid);

// Whether process `pid` of this namespace still runs. A zombie (exited, not yet reaped by its parent,
// yet still answering kill(pid, 0)) does not, and neither does a process given the pid since
// `started` (the start time recorded when the pid was written down; nullopt: not recorded).
bool process_running(int64_t pid, std::optional<uint64_t> started);

}  // namespace sjd::io
