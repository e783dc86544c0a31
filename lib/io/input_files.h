#pragma once
// Checks on the files sjd is told to read or write, made before anything is
// opened: a FIFO or device would block or never end, a directory gives a
// filesystem message instead of a reason, a name in a bundle could point
// anywhere on disk, and writing an image through a symlink or onto a device
// node would replace something that is not the user's image. Every error is a
// FileError (bad input, exit code 2) naming the path.
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace sjd::io {

// `path` exists and is a regular file (symlinks followed); `what` names its role
// in the message ("prompt file", "config file"). Throws FileError otherwise.
void require_regular_file(const std::filesystem::path& path, const std::string& what);

// require_regular_file, and no longer than `max_bytes`: for a file read whole into memory, whose size
// is bounded before it is read (a 300 MB file given as --config ran out of memory as JSON).
void require_file_at_most(const std::filesystem::path& path, const std::string& what, uint64_t max_bytes);

// `dir / name` for a file name taken from a bundle or an index: the name must be
// relative and must not climb out of `dir` ("..") -- a downloaded bundle.json may
// not read /etc/passwd. Symlinks the user placed inside `dir` are followed (a
// Hugging Face cache links its blobs that way). `where` names the JSON key.
std::filesystem::path confined_path(const std::filesystem::path& dir, const std::string& name,
                                    const std::string& where);

// A file can be created in `dir` (a probe file is made and removed at once): an
// output folder sjd cannot write fails before the work, not after it (root may
// pass every permission bit and still be refused, as in /proc).
void check_folder_writable(const std::filesystem::path& dir);

// An output `path` may be absent or an existing regular file, never a symlink,
// FIFO, device, socket or directory, and its folder must exist.
void check_output_path(const std::filesystem::path& path);

// A stat's modification time in nanoseconds since the epoch: a batch claim and a folder a failed run made
// are recognised by it, and whole seconds would miss a change within the same second.
inline int64_t modification_ns(const struct stat& info) {
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
}

}  // namespace sjd::io
