#pragma once
// The output folders a command made (prepare_output_dir), so that a command that fails, or that Ctrl-C
// or SIGTERM ends, leaves none of them behind empty. A folder another process has meanwhile taken as its
// own (put a file in, or probed as its output folder) stays, and so does every folder that was there.
#include <signal.h>

#include <filesystem>
#include <vector>

namespace sjd::engine {

// Records folders this process has just made (and probed): their modification times from now on tell
// this process's changes from another's. Call it while SigintSigtermHeld holds the signals, so that a
// signal cannot end the process between making the folders and recording them.
void record_created_folders(const std::vector<std::filesystem::path>& made);

// Removes the recorded folders that are still empty and untouched by others, deepest first. At most the
// 32 deepest are kept track of (a command makes a handful: -o's folder and its missing parents).
void remove_empty_created_folders();

// The same from a signal handler: async-signal-safe (lstat and rmdir over fixed storage, no allocation).
void remove_empty_created_folders_on_signal();

// Blocks SIGINT and SIGTERM in the calling thread for its lifetime; one that arrives meanwhile is
// delivered when it ends.
class SigintSigtermHeld {
 public:
  SigintSigtermHeld();
  ~SigintSigtermHeld();
  SigintSigtermHeld(const SigintSigtermHeld&) = delete;
  SigintSigtermHeld& operator=(const SigintSigtermHeld&) = delete;

 private:
  sigset_t before_;  // the thread's mask before
};

}  // namespace sjd::engine
