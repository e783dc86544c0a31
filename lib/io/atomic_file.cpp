#include "io/atomic_file.h"

#include "io/input_files.h"
#include "io/process_identity.h"
#include "io/unfinished_files.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sjd::io {
namespace {

std::string system_reason() { return std::strerror(errno); }

// A write that failed because of the disk, not because of the path the user gave.
[[noreturn]] void fail_write(const std::string& what, int error) {
  const std::string message = what + ": " + std::strerror(error);
  if (error == ENOSPC || error == EDQUOT || error == EIO || error == EFBIG) throw StorageError(message);
  throw FileError(message);
}

// Writes all of `size` bytes, resuming after partial writes and signals.
bool write_fully(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

std::filesystem::path directory_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

// Makes a completed rename durable; failure only weakens crash safety, so it is ignored.
void sync_directory(const std::filesystem::path& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

const std::string& temporary_file_home() {
  // A 64-bit FNV-1a hash of "HOST~NS" in hex: short, and different for hosts whose names share a
  // long prefix.
  static const std::string home = [] {
    uint64_t hash = 1469598103934665603ull;
    for (const char c : host_name() + "~" + pid_namespace()) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
    return std::string(text);
  }();
  return home;
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target) : target_(std::move(target)) {
  check_output_path(target_);
  static std::atomic<unsigned> counter{0};
  // The temporary's name keeps to the 255-byte limit a name near it fits: the target's name is cut
  // to leave room for ".tmp.PID.N@HOME" (at most 45 bytes) and the leading dot.
  std::string name = target_.filename().string();
  if (name.size() > 209) name.resize(209);
  const std::string stem = "." + name + ".tmp." + std::to_string(::getpid()) + ".";
  // O_EXCL with a fresh name per attempt: two writers (threads or processes)
  // of the same target never share a temporary file.
  int error = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = directory_of(target_) / (stem + std::to_string(counter++) + "@" + temporary_file_home());
    unfinished_slot_ = track_unfinished_file(temp_);  // before it exists: a signal in between finds no file
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    error = errno;
    forget_unfinished_file(unfinished_slot_);
    unfinished_slot_ = -1;
    if (error != EEXIST) break;
  }
  throw FileError("cannot create " + target_.string() + ": " + std::strerror(error));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
  forget_unfinished_file(unfinished_slot_);
}

void AtomicFileWriter::write(const void* data, size_t size) {
  if (fd_ < 0) throw FileError("cannot write " + target_.string() + ": file already committed");
  if (!write_fully(fd_, static_cast<const char*>(data), size)) fail_write("cannot write " + target_.string(), errno);
}

void AtomicFileWriter::flush() {
  if (fd_ < 0) throw FileError("cannot flush " + target_.string() + ": file already committed");
  if (::fsync(fd_) != 0) fail_write("cannot flush " + target_.string(), errno);
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw FileError("cannot commit " + target_.string() + ": file already committed");
  if (::fsync(fd_) != 0) fail_write("cannot flush " + target_.string(), errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp_.c_str());
    fail_write("cannot write " + target_.string(), error);
  }
  const bool renamed = ::rename(temp_.c_str(), target_.c_str()) == 0;
  const std::string reason = renamed ? "" : system_reason();
  if (!renamed) ::unlink(temp_.c_str());
  forget_unfinished_file(unfinished_slot_);
  unfinished_slot_ = -1;
  if (!renamed) throw FileError("cannot replace " + target_.string() + ": " + reason);
  sync_directory(directory_of(target_));
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFileWriter writer(path);
  writer.write(bytes);
  writer.commit();
}

namespace {

// Opens `path` for appending (created if absent) and takes its write lock,
// waiting for the holder. An open-file-description lock (F_OFD_SETLKW): unlike a
// classic fcntl lock it is not dropped when the process closes another
// descriptor of the file (a reader's), and it excludes threads too; NFS clients
// carry it to the server's lock manager.
// When the file was replaced while this waited (a merge renamed a new one over
// it), the new file is opened instead. A file system without locks (ENOLCK)
// leaves the file unlocked: single-line appends stay whole there on local disks.
int open_locked_for_append(const std::filesystem::path& path) {
  for (;;) {
    // O_NOFOLLOW: a manifest that is a symlink would send records elsewhere. O_RDWR: append_line reads
    // the last byte.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd < 0) throw FileError("cannot open " + path.string() + " for appending: " + system_reason());
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw FileError("cannot append to " + path.string() + ": not a regular file");
    }
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file
    int locked;
    while ((locked = ::fcntl(fd, F_OFD_SETLKW, &lock)) != 0 && errno == EINTR) {
    }
    if (locked != 0 && errno != ENOLCK) {
      const std::string reason = system_reason();
      ::close(fd);
      throw FileError("cannot lock " + path.string() + ": " + reason);
    }
    struct stat now {};
    if (::lstat(path.c_str(), &now) == 0 && now.st_ino == info.st_ino && now.st_dev == info.st_dev) return fd;
    ::close(fd);  // replaced while waiting: lock the new file
  }
}

}  // namespace

void append_line(const std::filesystem::path& path, std::string_view line) {
  if (line.find('\n') != std::string_view::npos) {
    throw FileError("cannot append to " + path.string() + ": the line contains a newline");
  }
  std::string record(line);
  record.push_back('\n');
  const int fd = open_locked_for_append(path);
  struct stat info {};
  ::fstat(fd, &info);  // the size under the lock, to cut a failed write back to
  // A file cut mid-line (a truncated copy, an editor) gets its newline first: the record starts a line
  // of its own, and the cut line stays one damaged line that readers skip, not glued to this one.
  char last = '\n';
  if (info.st_size > 0 && ::pread(fd, &last, 1, info.st_size - 1) == 1 && last != '\n') record.insert(0, "\n");
  const bool written = write_fully(fd, record.data(), record.size()) && ::fdatasync(fd) == 0;
  const int error = errno;
  if (!written && ::ftruncate(fd, info.st_size) == 0) ::fdatasync(fd);  // no partial line stays behind
  ::close(fd);                                                          // releases the lock
  if (!written) fail_write("cannot append to " + path.string(), error);
}

AppendLock::AppendLock(const std::filesystem::path& path) : fd_(open_locked_for_append(path)) {}

AppendLock::~AppendLock() { ::close(fd_); }

int remove_stale_temporaries(const std::filesystem::path& dir) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    // ".NAME.tmp.PID.N@HOME" (before 2026-11-28 without "@HOME": taken as this home's).
    const std::string name = entry.path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    if (name.empty() || name[0] != '.' || tmp == std::string::npos) continue;
    std::string rest = name.substr(tmp + 5);
    if (const size_t at = rest.find('@'); at != std::string::npos) {
      if (rest.substr(at + 1) != temporary_file_home()) continue;  // another machine's or container's
      rest.resize(at);
    }
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0) continue;
    const std::string pid_text = rest.substr(0, dot);
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    if (process_running(std::stol(pid_text), std::nullopt)) continue;  // it may still be writing it
    if (std::filesystem::remove(entry.path(), error)) ++removed;
  }
  return removed;
}

}  // namespace sjd::io
