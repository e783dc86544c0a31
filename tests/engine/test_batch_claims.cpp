// The claim board's judgement of owners on this host, and what a process does when its claim
// was taken over: docs/security.md, "Batch folders shared by several processes".
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/batch_claims.h"
#include "io/process_identity.h"
#include "testing/test_support.h"

using namespace sjd;
using sjd::testing::TempDir;

namespace {

const nlohmann::json kIdentity = {{"prompt", "a red circle"}, {"seed", 7}};

// A claim of image 0 as another process on this host would have written it.
void write_claim(const std::filesystem::path& dir, int64_t pid, const nlohmann::json& start = nullptr) {
  nlohmann::json claim{{"host", io::host_name()}, {"pid", pid}, {"token", "other"}, {"identity", kIdentity}};
  if (!start.is_null()) claim["start"] = start;
  std::ofstream(dir / ".claim.0") << claim.dump();
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

engine::FileStamp stamp(const std::filesystem::path& file) {
  struct stat info {};
  REQUIRE(::lstat(file.c_str(), &info) == 0);
  return {info.st_dev, info.st_ino, static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec};
}

}  // namespace

TEST_CASE("claims: a live owner keeps its claim, a zombie owner's is taken over", "[batch][claims]") {
  TempDir dir("claims_zombie");
  engine::ClaimBoard board(dir.path(), std::chrono::seconds(600));
  write_claim(dir.path(), ::getppid());  // the test's parent runs
  CHECK_FALSE(board.try_claim(0, kIdentity));
  // A killed process that its parent has not reaped still answers kill(pid, 0).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  siginfo_t ended{};  // waits until the child has exited, leaving it unreaped (a zombie)
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &ended, WEXITED | WNOWAIT) == 0);
  write_claim(dir.path(), child);
  CHECK(board.try_claim(0, kIdentity));
  ::waitpid(child, nullptr, 0);
  CHECK(nlohmann::json::parse(read_text(dir / ".claim.0"))["pid"] == ::getpid());
}

TEST_CASE("claims: a pid given to another process since the claim was written counts as gone", "[batch][claims]") {
  TempDir dir("claims_pid_reuse");
  engine::ClaimBoard board(dir.path(), std::chrono::seconds(600));
  REQUIRE(board.try_claim(1, kIdentity));  // this process's own claim records its start time
  const nlohmann::json own = nlohmann::json::parse(read_text(dir / ".claim.1"));
  REQUIRE(own.contains("start"));
  write_claim(dir.path(), ::getppid(), own["start"].get<uint64_t>() + 12345);  // the parent, started at another time
  CHECK(board.try_claim(0, kIdentity));
}

TEST_CASE("claims: a claim taken over is neither recorded on nor removed by its old owner", "[batch][claims]") {
  TempDir dir("claims_taken_over");
  engine::ClaimBoard board(dir.path(), std::chrono::seconds(600));
  REQUIRE(board.try_claim(0, kIdentity));
  CHECK(board.still_holds(0));
  write_claim(dir.path(), ::getppid());  // what a take-over while this process was stopped leaves
  CHECK_FALSE(board.still_holds(0));
  board.release(0);
  CHECK(nlohmann::json::parse(read_text(dir / ".claim.0"))["token"] == "other");
}

TEST_CASE("claims: a claim unreadable for a moment is read again before it counts as another's", "[batch][claims]") {
  TempDir dir("claims_unreadable");
  engine::ClaimBoard board(dir.path(), std::chrono::seconds(600));
  REQUIRE(board.try_claim(0, kIdentity));
  const std::string own = read_text(dir / ".claim.0");
  std::ofstream(dir / ".claim.0", std::ios::trunc) << "";  // as a read failing on NFS sees it, for 20 ms
  std::thread restore([&] {  // whole at once (a rename), so no read sees it half-written
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ofstream(dir / "restored", std::ios::trunc) << own;
    std::filesystem::rename(dir / "restored", dir / ".claim.0");
  });
  CHECK(board.still_holds(0));  // was judged taken over at the first read: the image made was thrown away
  restore.join();
  // Still unreadable after the retries: another's (a take-over being written, or a damaged file).
  std::ofstream(dir / ".claim.0", std::ios::trunc) << "";
  CHECK_FALSE(board.still_holds(0));
}

TEST_CASE("claims: a take-over removes only the claim it judged stale, and puts any other back", "[batch][claims]") {
  TempDir dir("claims_put_back");
  const std::filesystem::path claim = dir / ".claim.0";
  std::ofstream(claim) << "stale";
  const engine::FileStamp judged = stamp(claim);

  SECTION("the file judged stale goes") {
    CHECK(engine::remove_if_unchanged(claim, judged, "mine"));
    CHECK_FALSE(std::filesystem::exists(claim));
  }
  SECTION("another process's new claim in its place stays") {
    std::ofstream(dir / "new") << "taken over";  // written aside and renamed in: another file, same name
    std::filesystem::rename(dir / "new", claim);
    CHECK_FALSE(engine::remove_if_unchanged(claim, judged, "mine"));
    CHECK(read_text(claim) == "taken over");
  }
  SECTION("the stale file touched since by its owner stays") {
    const timespec later[2] = {{0, UTIME_OMIT}, {judged.touched_ns / 1000000000 + 30, 0}};
    REQUIRE(::utimensat(AT_FDCWD, claim.c_str(), later, 0) == 0);
    CHECK_FALSE(engine::remove_if_unchanged(claim, judged, "mine"));
    CHECK(read_text(claim) == "stale");
  }
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.push_back(entry.path().filename());
  CHECK(std::count_if(left.begin(), left.end(), [](const std::string& name) {
          return name.find(".stale.") != std::string::npos;
        }) == 0);  // nothing left aside
}

TEST_CASE("claims: an empty claim is its owner's for a minute, then stale", "[batch][claims]") {
  TempDir dir("claims_empty");
  engine::ClaimBoard board(dir.path(), std::chrono::seconds(600));
  std::ofstream(dir / ".claim.0").flush();  // what a process killed between creating and writing it leaves
  CHECK_FALSE(board.try_claim(0, kIdentity));  // its owner may be writing it right now
  std::filesystem::last_write_time(dir / ".claim.0",
                                   std::filesystem::file_time_type::clock::now() - std::chrono::minutes(2));
  CHECK(board.try_claim(0, kIdentity));
  CHECK(nlohmann::json::parse(read_text(dir / ".claim.0"))["pid"] == ::getpid());
}
