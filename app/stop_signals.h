#pragma once
// Ctrl-C (SIGINT) or SIGTERM during `sjd batch` or `sjd compare`: the first asks the run to start no new image --
// those in flight finish and are written, and the summary is printed -- and a second one ends the
// process at once (the default action, after removing the temporary files being written). Either way
// nothing written is lost and the same command resumes; stopping gently only saves the images that
// were nearly made.
#include <string>

namespace sjd::app {

// Installs the handlers; a signal the process was started ignoring (nohup, a background job of a
// script) stays ignored.
void install_stop_signals();

// Until a command installs the above (or for commands that never do: generate, inspect, bench), SIGINT
// and SIGTERM end the process as by default, after removing the temporary files being written
// (io/unfinished_files.h) and the output folders it made that are still empty (engine/created_folders.h),
// as a command that fails does.
void install_cleanup_signals();

// The signal that asked to stop, or 0.
int stop_signal();

// "Ctrl-C (SIGINT)" or "SIGTERM", for the summary line.
std::string stop_signal_name(int signal);

// Once the stopped run has written its summary: ends the process by that signal (default action), so
// that a shell sees a process the signal ended -- bash stops a script's loop on Ctrl-C only then --
// and reports 128 + its number. Returns only when no stop was asked.
void end_by_stop_signal();

}  // namespace sjd::app
