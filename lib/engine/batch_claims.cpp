#include "engine/batch_claims.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "engine/batch_manifest.h"
#include "engine/bundle.h"
#include "io/atomic_file.h"
#include "io/input_files.h"
#include "io/process_identity.h"

namespace sjd::engine {
namespace {

std::string random_token() {
  std::random_device device;
  std::ostringstream out;
  out << std::hex << device() << device();
  return out.str();
}

constexpr auto kHeartbeat = std::chrono::seconds(20);
// A claim's owner writes it right after creating it: one still empty or unreadable this long after its
// last touch was left by a process killed in between (its image would otherwise wait the claim timeout).
constexpr auto kUnwritten = std::chrono::seconds(60);

// A live claim of another run: refuse, naming the claim, its owner and what differs.
[[noreturn]] void refuse_other_run(const std::filesystem::path& claim, const nlohmann::json& content,
                                   const nlohmann::json& identity) {
  throw InputError(claim.string() + ": another sjd batch (" + content.value("host", std::string()) + ", process " +
                   std::to_string(content.value("pid", int64_t{0})) + ") is working in this folder with " +
                   identity_difference(content["identity"], identity) + "; wait for it or use another --out-dir");
}

bool other_identity(const nlohmann::json& content, const nlohmann::json& identity) {
  return content.is_object() && content.contains("identity") && !same_identity(content["identity"], identity);
}

FileStamp stamp_of(const struct stat& info) {
  return {info.st_dev, info.st_ino, io::modification_ns(info)};
}

}  // namespace

bool remove_if_unchanged(const std::filesystem::path& file, const FileStamp& seen, const std::string& aside) {
  const std::filesystem::path taken = file.string() + ".stale." + aside;
  if (::rename(file.c_str(), taken.c_str()) != 0) return false;
  struct stat info {};
  const bool same = ::lstat(taken.c_str(), &info) == 0 && stamp_of(info) == seen;
  if (!same) ::link(taken.c_str(), file.c_str());  // fails, leaving the newer claim, where one is there now
  ::unlink(taken.c_str());
  return same;
}

ClaimBoard::ClaimBoard(std::filesystem::path dir, std::chrono::seconds stale_after)
    : dir_(std::move(dir)),
      stale_after_(stale_after),
      host_(io::host_name()),
      pid_namespace_(io::pid_namespace()),
      token_(random_token()) {
  heartbeat_ = std::thread([this] { heartbeat(); });
}

ClaimBoard::~ClaimBoard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  heartbeat_.join();
  for (int64_t index : held_) {
    if (owns_file(path_of(index))) ::unlink(path_of(index).c_str());
  }
}

std::filesystem::path ClaimBoard::path_of(int64_t index) const {
  return dir_ / (".claim." + std::to_string(index));
}

ClaimBoard::Claim ClaimBoard::inspect(const std::filesystem::path& file) const {
  Claim claim;
  struct stat info {};
  if (::lstat(file.c_str(), &info) != 0) return claim;
  claim.exists = true;
  if (S_ISREG(info.st_mode)) {  // anything else (a FIFO would block the read) is no claim: stale
    std::ifstream in(file, std::ios::binary);
    try {
      claim.content = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      claim.content = nullptr;  // being written, or damaged: judged by its age alone
    }
  }
  const auto touched = std::chrono::system_clock::from_time_t(info.st_mtim.tv_sec);
  const auto age = std::chrono::system_clock::now() - touched;
  const bool fresh = age < stale_after_ && (claim.content.is_object() || age < kUnwritten);
  bool owner_alive = true;
  // Its owner's pid means something only on this host, in this pid namespace (a claim from before
  // namespaces were recorded is taken as this one's).
  if (claim.content.is_object() && claim.content.value("host", std::string()) == host_ &&
      claim.content.value("pid_ns", pid_namespace_) == pid_namespace_) {
    const nlohmann::json& start = claim.content.contains("start") ? claim.content["start"] : nlohmann::json();
    owner_alive = io::process_running(claim.content.value("pid", int64_t{0}),
                                      start.is_number_unsigned() ? std::optional<uint64_t>(start.get<uint64_t>())
                                                                 : std::nullopt);
  }
  claim.live = fresh && owner_alive && S_ISREG(info.st_mode);
  claim.stamp = stamp_of(info);
  return claim;
}

bool ClaimBoard::try_claim(int64_t index, const nlohmann::json& identity) {
  const std::filesystem::path file = path_of(index);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Claim existing = inspect(file);
    if (existing.exists) {
      if (existing.live) {
        if (other_identity(existing.content, identity)) refuse_other_run(file, existing.content, identity);
        return false;
      }
      remove_if_unchanged(file, existing.stamp, token_);
    }
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;  // someone claimed it in between: look again
      throw io::FileError("cannot create " + file.string() + ": " + std::strerror(errno));
    }
    nlohmann::json owner{{"host", host_},   {"pid_ns", pid_namespace_}, {"pid", ::getpid()},
                         {"token", token_}, {"identity", identity}};
    if (const std::optional<uint64_t> start = io::process_start_ticks(::getpid())) owner["start"] = *start;
    const std::string content = owner.dump();
    const ssize_t count = ::write(fd, content.data(), content.size());
    // A short write to a regular file means the disk filled up while writing.
    const int write_error = count < 0 ? errno : ENOSPC;
    const bool written = count == static_cast<ssize_t>(content.size());
    ::close(fd);
    std::lock_guard<std::mutex> lock(mutex_);
    held_.insert(index);
    if (!written) throw io::StorageError("cannot write " + file.string() + ": " + std::strerror(write_error));
    return true;
  }
  return false;
}

void ClaimBoard::drop_if_stale(int64_t index) {
  const std::filesystem::path file = path_of(index);
  const Claim existing = inspect(file);
  if (existing.exists && !existing.live) remove_if_unchanged(file, existing.stamp, token_);
}

bool ClaimBoard::owns_file(const std::filesystem::path& file) const {
  // A claim that is there but does not read as JSON is read again a moment later: on NFS a read can fail
  // for a moment (ESTALE), and a new owner's claim is empty only between its creation and its write.
  // Judged another's at once, the image this process had just made was thrown away.
  for (int attempt = 0;; ++attempt) {
    const Claim claim = inspect(file);
    if (!claim.exists) return false;
    if (claim.content.is_object()) return claim.content.value("token", std::string()) == token_;
    if (attempt == 2) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool ClaimBoard::still_holds(int64_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!held_.count(index)) return false;
  if (owns_file(path_of(index))) return true;
  held_.erase(index);  // taken over while this process was stopped: the claim, and the image, are another's
  return false;
}

void ClaimBoard::release(int64_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (held_.erase(index) && owns_file(path_of(index))) ::unlink(path_of(index).c_str());
}

void ClaimBoard::check_live_claims(const std::function<nlohmann::json(int64_t)>& identity_of, int64_t count) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".claim.", 0) != 0) continue;
    const std::string digits = name.substr(7);
    if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const int64_t index = std::stoll(digits);
    if (index >= count) continue;
    const Claim claim = inspect(entry.path());
    const nlohmann::json identity = identity_of(index);
    if (claim.live && other_identity(claim.content, identity)) refuse_other_run(entry.path(), claim.content, identity);
  }
}

void ClaimBoard::heartbeat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, kHeartbeat, [this] { return stopping_; })) {
    for (int64_t index : held_) ::utimensat(AT_FDCWD, path_of(index).c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  }
}

}  // namespace sjd::engine
