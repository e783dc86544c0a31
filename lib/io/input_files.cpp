#include "io/input_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "io/atomic_file.h"

namespace sjd::io {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// "16.8 MB": a size in the unit files are usually counted in.
std::string megabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

void require_regular_file(const std::filesystem::path& path, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const std::string reason = errno == ENOENT ? "not found" : errno == ELOOP ? "a loop of symbolic links"
                                                                             : std::strerror(errno);
    throw FileError(path.string() + ": " + what + ": " + reason);
  }
  if (!S_ISREG(info.st_mode)) {
    throw FileError(path.string() + ": " + what + " is " + kind_of(info.st_mode) + ", not a regular file");
  }
}

void require_file_at_most(const std::filesystem::path& path, const std::string& what, uint64_t max_bytes) {
  require_regular_file(path, what);
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (!error && size > max_bytes) {
    throw FileError(path.string() + ": " + what + " of " + megabytes(size) + ", more than one can be (at most " +
                    megabytes(max_bytes) + "): is this the right file?");
  }
}

std::filesystem::path confined_path(const std::filesystem::path& dir, const std::string& name,
                                    const std::string& where) {
  const std::filesystem::path relative(name);
  if (name.empty() || relative.is_absolute() || relative.has_root_name() || relative.has_root_directory()) {
    throw FileError(where + ": \"" + name + "\" must be a file name relative to " + dir.string());
  }
  for (const auto& part : relative) {
    if (part == "..") throw FileError(where + ": \"" + name + "\" climbs out of " + dir.string() + " (\"..\")");
  }
  return dir / relative;
}

void check_folder_writable(const std::filesystem::path& dir) {
  std::string probe = (dir / ".sjd-write-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) throw FileError(dir.string() + ": cannot create files in this folder (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_output_path(const std::filesystem::path& path) {
  // Said before the work: the write itself would fail only once the image is made.
  const size_t name_bytes = path.filename().string().size();
  if (name_bytes > NAME_MAX) {
    throw FileError(path.string() + ": the output's name is " + std::to_string(name_bytes) +
                    " bytes, more than the " + std::to_string(NAME_MAX) + " a file name can have");
  }
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 && errno != ENOENT) {
    throw FileError(path.string() + ": cannot write the output there: " + std::strerror(errno));
  }
  if (::lstat(path.c_str(), &info) == 0) {
    if (!S_ISREG(info.st_mode)) {
      throw FileError(path.string() + ": the output exists and is " + kind_of(info.st_mode) +
                      "; sjd only replaces regular files");
    }
    return;
  }
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  struct stat dir_info {};
  if (::stat(folder.c_str(), &dir_info) != 0 || !S_ISDIR(dir_info.st_mode)) {
    throw FileError(path.string() + ": the output folder " + folder.string() + " does not exist");
  }
}

}  // namespace sjd::io
