#pragma once
// The temporary files this process is writing (AtomicFileWriter's), so that a signal that ends it --
// Ctrl-C during generate, a second Ctrl-C during a batch -- removes them instead of leaving hidden
// half-files beside the outputs. At most 16 at a time are kept track of (a command writes one or two).
#include <filesystem>

namespace sjd::io {

// Starts keeping track of `file`; returns its slot, or -1 when every slot is taken (the file is then
// left behind by a signal, as before). Call it before creating the file: a signal in between unlinks a
// name not yet made, which does no harm.
int track_unfinished_file(const std::filesystem::path& file);

// Stops keeping track of the file in `slot` (-1: nothing), once it was renamed into place or removed.
void forget_unfinished_file(int slot);

// Removes every tracked file. Async-signal-safe (unlink over fixed storage), for a handler that then
// ends the process; the slots stay as they were.
void remove_unfinished_files_on_signal();

}  // namespace sjd::io
