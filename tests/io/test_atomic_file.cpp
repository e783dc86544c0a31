// Atomic whole-file writes and line appends (the batch manifest).
#include "io/atomic_file.h"
#include "io/unfinished_files.h"
#include "testing/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace io = sjd::io;
using Catch::Matchers::Contains;
using sjd::testing::TempDir;

namespace {

size_t entries_in(const std::filesystem::path& directory) {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(directory),
                                           std::filesystem::directory_iterator{}));
}

extern "C" void remove_unfinished_and_end(int signal) {
  io::remove_unfinished_files_on_signal();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

TEST_CASE("write_file_atomic creates and replaces files, leaving no temporary", "[io][atomic]") {
  TempDir dir("atomic_write");
  const auto file = dir / "stats.json";
  io::write_file_atomic(file, "first");
  CHECK(sjd::testing::read_file(file) == "first");
  io::write_file_atomic(file, std::string("sec\0ond", 7));
  CHECK(sjd::testing::read_file(file) == std::string("sec\0ond", 7));
  CHECK(entries_in(dir.path()) == 1);
}

TEST_CASE("an uncommitted writer leaves the target untouched", "[io][atomic]") {
  TempDir dir("atomic_abort");
  const auto file = dir / "weights.bin";
  io::write_file_atomic(file, "old");
  {
    io::AtomicFileWriter writer(file);
    writer.write("new content");
  }  // destroyed without commit(), as when an exception interrupts writing
  CHECK(sjd::testing::read_file(file) == "old");
  CHECK(entries_in(dir.path()) == 1);
}

TEST_CASE("atomic writes to impossible places name the path", "[io][atomic]") {
  TempDir dir("atomic_errors");
  const auto in_missing_dir = dir / "no" / "such" / "file.txt";
  CHECK_THROWS_AS(io::write_file_atomic(in_missing_dir, "x"), io::FileError);
  CHECK_THROWS_WITH(io::write_file_atomic(in_missing_dir, "x"), Contains(in_missing_dir.string()));
  CHECK_THROWS_WITH(io::write_file_atomic("/proc/sjd_atomic_test", "x"), Contains("/proc/sjd_atomic_test"));
  // A directory cannot be replaced by a file: the rename fails and the temporary is removed.
  std::filesystem::create_directory(dir / "taken");
  std::filesystem::create_directory(dir / "taken" / "child");
  CHECK_THROWS_WITH(io::write_file_atomic(dir / "taken", "x"), Contains((dir / "taken").string()));
  CHECK(entries_in(dir.path()) == 1);
}

TEST_CASE("append_line appends whole lines", "[io][atomic]") {
  TempDir dir("atomic_append");
  const auto manifest = dir / "manifest.jsonl";
  io::append_line(manifest, R"({"image": "0.png"})");
  io::append_line(manifest, R"({"image": "1.png"})");
  CHECK(sjd::testing::read_file(manifest) == "{\"image\": \"0.png\"}\n{\"image\": \"1.png\"}\n");
  CHECK_THROWS_WITH(io::append_line(manifest, "two\nlines"), Contains(manifest.string()) && Contains("newline"));
  CHECK_THROWS_WITH(io::append_line(dir / "missing" / "m.jsonl", "x"), Contains("missing/m.jsonl"));
  CHECK(sjd::testing::read_file(manifest) == "{\"image\": \"0.png\"}\n{\"image\": \"1.png\"}\n");
  // A file cut mid-line: the new record starts a line of its own, the cut one is left alone.
  sjd::testing::write_file(manifest, "{\"image\": \"0.png\"}\n{\"ima");
  io::append_line(manifest, R"({"image": "1.png"})");
  CHECK(sjd::testing::read_file(manifest) == "{\"image\": \"0.png\"}\n{\"ima\n{\"image\": \"1.png\"}\n");
}

TEST_CASE("append_line waits for an AppendLock and then appends to the file that replaced it", "[io][atomic]") {
  TempDir dir("atomic_append_lock");
  const auto manifest = dir / "manifest.jsonl";
  io::append_line(manifest, "old");
  std::atomic<bool> started{false}, appended{false};
  std::thread appender;
  {
    const io::AppendLock lock(manifest);
    appender = std::thread([&] {
      started = true;
      io::append_line(manifest, "late");
      appended = true;
    });
    // The appender must be waiting on the old file's lock when it is replaced: one that started only
    // after the replacement would append to the new file whatever the lock did.
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK_FALSE(appended);  // waiting for the lock
    io::write_file_atomic(manifest, "merged\n");
  }
  appender.join();
  CHECK(sjd::testing::read_file(manifest) == "merged\nlate\n");  // not lost in the replaced file
}

TEST_CASE("a signal that ends the process while a file is written removes its temporary", "[io][atomic]") {
  TempDir dir("atomic_signal");
  const auto file = dir / "image.png";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // what app/stop_signals.cpp's handler does, in a process of its own
    try {
      std::signal(SIGTERM, remove_unfinished_and_end);
      // More committed and abandoned writers than there are slots: each gives its slot back.
      for (int i = 0; i < 40; ++i) {
        io::AtomicFileWriter writer(file);
        writer.write("old");
        if (i % 2 == 0) writer.commit();
      }
      io::AtomicFileWriter writer(file);
      writer.write("half of an image");
      writer.flush();
      std::raise(SIGTERM);
    } catch (...) {  // never back into the test runner from the child
    }
    ::_exit(3);  // reached only if the signal did not end the process
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(sjd::testing::read_file(file) == "old");
  CHECK(entries_in(dir.path()) == 1);  // the temporary went with the process
}

TEST_CASE("the handler removes only the files still being written", "[io][atomic]") {
  TempDir dir("atomic_tracked");
  const int slot = io::track_unfinished_file(dir / "a.tmp");
  REQUIRE(slot >= 0);
  sjd::testing::write_file(dir / "a.tmp", "a");
  sjd::testing::write_file(dir / "b.tmp", "b");
  const int other = io::track_unfinished_file(dir / "b.tmp");
  io::forget_unfinished_file(other);
  io::remove_unfinished_files_on_signal();
  CHECK_FALSE(std::filesystem::exists(dir / "a.tmp"));
  CHECK(std::filesystem::exists(dir / "b.tmp"));
  io::forget_unfinished_file(slot);
  io::forget_unfinished_file(-1);  // nothing
}
