#include "engine/created_folders.h"

#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "io/input_files.h"

namespace sjd::engine {
namespace {

// A folder this process made, and its modification time when this process last changed it: another
// process that has since put a file in it, or probed it as its own output folder (prepare_output_dir's
// writable probe creates and removes a file), changed that time, and the folder is then left to it.
struct CreatedFolder {
  char path[PATH_MAX];
  int64_t modified_ns;
};
constexpr int kMaxFolders = 32;

// Two lists, so that a signal handler reads one that is not being written: a new list is written into
// the other and published by one atomic store of (list << 8 | count); -1 when there is none.
CreatedFolder lists[2][kMaxFolders];
std::atomic<int> published{-1};
std::atomic<bool> removing{false};  // a SIGINT and a SIGTERM taken by two threads remove once
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

std::vector<std::filesystem::path>& recorded() {
  static std::vector<std::filesystem::path> folders;
  return folders;
}

int64_t modified_ns(const char* folder) {
  struct stat info {};
  if (::lstat(folder, &info) != 0) return -1;
  return io::modification_ns(info);
}

// Writes the recorded folders, longest path first (a folder inside another has the longer absolute
// path, so it goes before the folder that holds it), with their times now, and publishes them.
void publish() {
  std::vector<std::filesystem::path> folders = recorded();
  std::sort(folders.begin(), folders.end(),
            [](const auto& a, const auto& b) { return a.native().size() > b.native().size(); });
  const int current = published.load();
  const int list = current < 0 ? 0 : 1 - (current >> 8);
  int count = 0;
  for (const std::filesystem::path& folder : folders) {
    if (count == kMaxFolders || folder.native().size() >= PATH_MAX) continue;  // left behind
    std::memcpy(lists[list][count].path, folder.c_str(), folder.native().size() + 1);
    lists[list][count].modified_ns = modified_ns(folder.c_str());
    ++count;
  }
  published.store(list << 8 | count);
}

// Async-signal-safe: the folders are only read, their times copied to the stack.
void remove_published() {
  const int current = published.exchange(-1);
  if (current < 0 || removing.exchange(true)) return;
  const CreatedFolder* folders = lists[current >> 8];
  const int count = current & 0xff;
  int64_t times[kMaxFolders];
  for (int i = 0; i < count; ++i) times[i] = folders[i].modified_ns;
  for (int i = 0; i < count; ++i) {  // rmdir removes only an empty folder
    if (modified_ns(folders[i].path) != times[i] || ::rmdir(folders[i].path) != 0) continue;
    // Removing it changed its parent's time, a change of this process's: the parent's is read again.
    const char* slash = std::strrchr(folders[i].path, '/');
    const size_t parent_length = slash == nullptr ? 0 : static_cast<size_t>(slash - folders[i].path);
    for (int j = i + 1; j < count; ++j) {
      if (std::strlen(folders[j].path) == parent_length &&
          std::strncmp(folders[j].path, folders[i].path, parent_length) == 0) {
        times[j] = modified_ns(folders[j].path);
      }
    }
  }
  removing.store(false);
}

}  // namespace

void record_created_folders(const std::vector<std::filesystem::path>& made) {
  recorded().insert(recorded().end(), made.begin(), made.end());
  publish();  // every folder's time is read again: the probe of the newest changed this process's folders
}

void remove_empty_created_folders() {
  remove_published();
  recorded().clear();
}

void remove_empty_created_folders_on_signal() { remove_published(); }

SigintSigtermHeld::SigintSigtermHeld() {
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGINT);
  sigaddset(&both, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &both, &before_);
}

SigintSigtermHeld::~SigintSigtermHeld() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }

}  // namespace sjd::engine
