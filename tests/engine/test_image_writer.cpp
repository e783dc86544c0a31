// engine::ImageWriter: writes on its thread, completions on the caller's, in
// submission order, never before their write has returned; room for at most
// max_pending writes; a failed write or a throwing completion loses no other
// completion. Writes that must wait are held by promises; where a sleep lets a
// write go, the assertions hold whichever thread runs first.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/image_writer.h"

using sjd::engine::ImageWriter;

TEST_CASE("image writer: writes on its own thread, completions on the caller's, in submission order",
          "[engine][batch]") {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> write_threads;
  std::vector<int> completed;
  bool completions_on_caller = true;
  ImageWriter writer(8);
  for (int i = 0; i < 5; ++i) {
    writer.submit(
        [&, i] {
          write_threads.push_back(std::this_thread::get_id());
          return 0.5 * i;
        },
        [&, i](double seconds, std::exception_ptr failure) {
          completions_on_caller = completions_on_caller && std::this_thread::get_id() == caller;
          CHECK(seconds == 0.5 * i);
          CHECK_FALSE(failure);
          completed.push_back(i);
        });
  }
  writer.drain();
  CHECK(completed == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(completions_on_caller);
  REQUIRE(write_threads.size() == 5);
  for (const std::thread::id id : write_threads) CHECK(id != caller);
  CHECK(writer.pending() == 0);
}

TEST_CASE("image writer: a completion runs only after its write returned, and only when the caller collects",
          "[engine][batch]") {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  bool written = false, completed = false;
  ImageWriter writer(4);
  writer.submit(
      [&] {
        released.wait();
        written = true;
        return 1.0;
      },
      [&](double, std::exception_ptr) {
        CHECK(written);
        completed = true;
      });
  writer.collect();  // the write is held: nothing to complete
  CHECK_FALSE(completed);
  CHECK(writer.pending() == 1);
  release.set_value();
  writer.drain();
  CHECK(completed);
}

TEST_CASE("image writer: submit waits for room and completes the oldest write first", "[engine][batch]") {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<std::string> events;
  ImageWriter writer(1);
  writer.submit([&] { released.wait(); return 0.0; }, [&](double, std::exception_ptr) { events.push_back("first done"); });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.set_value();
  });
  // Room for one: this submit returns only once the first write has finished and been completed.
  writer.submit([] { return 0.0; }, [&](double, std::exception_ptr) { events.push_back("second done"); });
  events.push_back("second submitted");
  opener.join();
  writer.drain();
  CHECK(events == std::vector<std::string>{"first done", "second submitted", "second done"});
}

TEST_CASE("image writer: a failed write reaches its completion, the others go on", "[engine][batch]") {
  std::vector<std::string> outcomes;
  ImageWriter writer(4);
  writer.submit([]() -> double { throw std::runtime_error("no room for the image"); },
                [&](double seconds, std::exception_ptr failure) {
                  CHECK(seconds == 0.0);
                  REQUIRE(failure);
                  try {
                    std::rethrow_exception(failure);
                  } catch (const std::runtime_error& e) {
                    outcomes.push_back(e.what());
                  }
                });
  writer.submit([] { return 2.0; }, [&](double, std::exception_ptr failure) {
    outcomes.push_back(failure ? "failed" : "written");
  });
  writer.drain();
  CHECK(outcomes == std::vector<std::string>{"no room for the image", "written"});
}

TEST_CASE("image writer: a throwing completion leaves the later ones for the next collect", "[engine][batch]") {
  std::vector<int> completed;
  ImageWriter writer(4);
  writer.submit([] { return 0.0; }, [&](double, std::exception_ptr) { throw std::runtime_error("disk full"); });
  writer.submit([] { return 0.0; }, [&](double, std::exception_ptr) { completed.push_back(2); });
  CHECK_THROWS_WITH(writer.drain(), "disk full");
  CHECK(completed.empty());
  writer.drain();
  CHECK(completed == std::vector<int>{2});
}

// Whether the queued write starts before the destructor stops the writer depends on timing, so only
// what does not is checked: the destructor returns, and only after the write under way has finished.
TEST_CASE("image writer: destroyed with a write under way, it waits for that write and returns", "[engine][batch]") {
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  bool first_finished = false;
  std::thread opener;
  {
    ImageWriter writer(4);
    writer.submit(
        [&] {
          started.set_value();
          released.wait();
          first_finished = true;
          return 0.0;
        },
        [](double, std::exception_ptr) {});
    writer.submit([] { return 0.0; }, [](double, std::exception_ptr) {});
    started.get_future().wait();
    opener = std::thread([&] { release.set_value(); });
  }
  opener.join();
  CHECK(first_finished);
}
