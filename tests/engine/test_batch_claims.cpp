// The claim board's judgement of owners on this host, and what a process does when its claim
// was taken over: docs/security.md, "Batch folders shared by several processes".
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

}  // namespace

TEST_CASE("claims: a live owner keeps its claim, a zombie owner's is taken over", "[batch][claims]") {
  TempDir dir("claims_zombie");
  engine::ClaimBoard board(dir.path(), std::chrono::seconds(600));
  write_claim(dir.path(), ::getppid());  // the test's parent runs
  CHECK_FALSE(board.try_claim(0, kIdentity));
  // A killed process that its parent has not reaped still answers kill(pid, 0).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
