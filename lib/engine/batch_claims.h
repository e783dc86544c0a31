#pragma once
// Per-image claims in a batch folder, so that several `sjd batch` processes
// (on one machine or on several sharing the folder) never make the same image
// twice and a process with other settings is refused while another still works
// there. Claiming image i creates ".claim.i" with O_EXCL; the file holds its
// owner (host, process id and start time, a random token) and the image's
// identity (prompt, model, settings, and what automatic windows read:
// batch_manifest.h). The owner touches it every heartbeat; a claim is stale --
// and taken over -- when its process is gone (same host: a zombie, or another
// process given the owner's pid since, counts as gone) or it has not been
// touched for `stale_after`. docs/security.md describes the protocol.
#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace sjd::engine {

// Which file a path named when it was looked at, and when that file was last touched.
struct FileStamp {
  dev_t device = 0;
  ino_t inode = 0;
  int64_t touched_ns = 0;
  bool operator==(const FileStamp& other) const {
    return device == other.device && inode == other.inode && touched_ns == other.touched_ns;
  }
};

// A take-over's removal of a stale claim: removes `file` only if it is still the file `seen` stamped,
// untouched since, and only in the one process whose rename succeeds (`aside` names the process:
// its token). Another process may meanwhile have taken the stale claim over and written its own, or
// the owner touched it: a file other than the one judged stale is put back. True when it was removed.
bool remove_if_unchanged(const std::filesystem::path& file, const FileStamp& seen, const std::string& aside);

class ClaimBoard {
 public:
  ClaimBoard(std::filesystem::path dir, std::chrono::seconds stale_after);
  ~ClaimBoard();  // stops the heartbeat and releases every claim still held
  ClaimBoard(const ClaimBoard&) = delete;
  ClaimBoard& operator=(const ClaimBoard&) = delete;

  // Claims image `index` for making it with `identity`; false when another live
  // process holds it. A live claim for another identity is an InputError: two
  // runs with other prompts or settings must not share a folder.
  bool try_claim(int64_t index, const nlohmann::json& identity);
  // Whether the claim of `index` is still this process's. A process stopped past the stale time
  // (SIGSTOP, a suspended job or VM) finds its claim taken over; it then leaves the image to the
  // new owner, writing neither the image nor its manifest line.
  bool still_holds(int64_t index);
  // Removes the claim, if it is still this process's (never another owner's that took it over).
  void release(int64_t index);
  // Removes a finished image's claim whose owner is gone (a run killed between
  // writing the image and releasing its claim), so no claim outlives its run.
  void drop_if_stale(int64_t index);

  // Checks every live claim of the folder against the identity this run would
  // give its image (images past `count` are not this run's business).
  void check_live_claims(const std::function<nlohmann::json(int64_t)>& identity_of, int64_t count);

 private:
  struct Claim {
    bool exists = false;
    bool live = false;
    nlohmann::json content;  // null while its owner is still writing it
    FileStamp stamp;         // a take-over removes this file only
  };
  std::filesystem::path path_of(int64_t index) const;
  Claim inspect(const std::filesystem::path& file) const;
  bool owns_file(const std::filesystem::path& file) const;
  void heartbeat();

  std::filesystem::path dir_;
  std::chrono::seconds stale_after_;
  std::string host_;
  std::string pid_namespace_;
  std::string token_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::set<int64_t> held_;
  std::thread heartbeat_;
};

}  // namespace sjd::engine
