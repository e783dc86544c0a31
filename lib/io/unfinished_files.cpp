#include "io/unfinished_files.h"

#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace sjd::io {
namespace {

enum SlotState : int { kFree = 0, kFilling = 1, kTracked = 2 };

// A slot's path is written while it is kFilling, then published by the release store of kTracked; a
// handler reads only kTracked slots, whose paths no thread writes until they are free again.
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
constexpr int kSlots = 16;
Slot slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free);

}  // namespace

int track_unfinished_file(const std::filesystem::path& file) {
  std::error_code error;
  const std::filesystem::path whole = std::filesystem::absolute(file, error);  // the handler needs no cwd
  if (error || whole.native().size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
    std::memcpy(slots[i].path, whole.c_str(), whole.native().size() + 1);
    slots[i].state.store(kTracked, std::memory_order_release);
    return i;
  }
  return -1;
}

void forget_unfinished_file(int slot) {
  if (slot >= 0 && slot < kSlots) slots[slot].state.store(kFree);
}

void remove_unfinished_files_on_signal() {
  for (Slot& slot : slots) {
    if (slot.state.load(std::memory_order_acquire) == kTracked) ::unlink(slot.path);
  }
}

}  // namespace sjd::io
