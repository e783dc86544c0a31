#pragma once
// Output files that are either complete or absent: content goes to a temporary
// file in the target's directory, which is flushed and then renamed over the
// target, so a crash or a full disk never leaves a half-written image or weight
// file behind (and readers that mmap the old file keep a valid copy).
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sjd::io {

// A file could not be created, written or renamed; the message names the path
// and the system's reason.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The disk refused the data (full, over quota, an I/O error): a runtime failure
// (exit code 1), not the user's input.
class StorageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Streams bytes into a temporary sibling of `target`; commit() makes them the
// target. Destroying an uncommitted writer removes the temporary file. The
// target must be absent or a regular file (io/input_files.h: never a symlink,
// FIFO or device, which the rename would replace).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Flushes the data written so far to disk (commit does too; after this its flush finds nothing to write).
  void flush();
  // Flushes the data to disk and renames the temporary file onto the target.
  void commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  int unfinished_slot_ = -1;  // io/unfinished_files.h: a signal that ends the process removes temp_
};

// Replaces `path` with `bytes` atomically.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Appends `line` and a newline to `path` (created if absent) with one write()
// call under the file's fcntl write lock, then flushes it to disk, so concurrent
// appenders -- on one machine or several sharing the folder over NFS -- never
// interleave within a line and a crash loses at most the line being written. `line` must
// not contain a newline (it would split one JSONL record into two). If the
// write fails (disk full) the file is cut back to its old size, so a partial
// line never swallows the next record, and StorageError is thrown.
void append_line(const std::filesystem::path& path, std::string_view line);

// Holds the lock append_line takes on `path` (created if absent), so that its
// holder may replace the file (write_file_atomic) without losing a line appended
// meanwhile: appenders wait, then append to the new file.
class AppendLock {
 public:
  explicit AppendLock(const std::filesystem::path& path);
  ~AppendLock();
  AppendLock(const AppendLock&) = delete;
  AppendLock& operator=(const AppendLock&) = delete;

 private:
  int fd_;
};

// Where this process's temporary files say they were written, as their names' last part: a hash of
// the host name and the pid namespace (16 hex digits). Another machine's or container's temporaries
// in a shared folder are not this process's to judge.
const std::string& temporary_file_home();

// Temporary files an AtomicFileWriter of a killed process left in `dir`
// (".NAME.tmp.PID.N@HOME" written on this host and pid namespace, whose process PID is gone) are
// removed; returns how many.
int remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace sjd::io
