#pragma once
// Writes a batch's finished images on a thread of its own, so that the batch's
// next steps run while a PNG is encoded and synced. stb's encoder is slow next to
// a GPU step: `sjd bench` timed 117 ms for a 512-px image on one core of the CPU
// machine (docs/benchmarks.md), the time of tens of Lumina's steps, for which
// every row of a batch stopped.
//
// Writes run one at a time in the order they were submitted. What follows a write
// (the manifest line, the claim, the counts) is its completion, run on the
// caller's thread by collect() or drain() after the write has returned, in the
// same order: a manifest line never names an image that is not yet on disk, and
// nothing but the write itself runs on the writer's thread.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace sjd::engine {

class ImageWriter {
 public:
  using Write = std::function<double()>;  // writes one image, returns the seconds it took
  // The write's seconds, or the exception it threw (then seconds is 0).
  using Completion = std::function<void(double seconds, std::exception_ptr failure)>;

  // At most `max_pending` writes queued or under way (at least 1); submit waits for room past that.
  explicit ImageWriter(size_t max_pending);
  // Finishes the write under way; writes not yet started and completions not yet run are dropped (a
  // batch makes those images again when it resumes: they have no manifest line).
  ~ImageWriter();
  ImageWriter(const ImageWriter&) = delete;
  ImageWriter& operator=(const ImageWriter&) = delete;

  void submit(Write write, Completion completion);
  // Runs the completions of the writes that have finished, in order; never waits. A completion that
  // throws stops there (the rest run at the next call).
  void collect();
  // Waits for every write submitted, running each completion as its write finishes.
  void drain();
  // Writes submitted whose completion has not run yet.
  size_t pending() const;

 private:
  struct Task {
    Write write;
    Completion completion;
    double seconds = 0.0;
    std::exception_ptr failure;
    bool finished = false;
  };
  void work();

  const size_t max_pending_;
  mutable std::mutex mutex_;
  std::condition_variable wake_writer_, write_finished_;
  std::deque<std::shared_ptr<Task>> tasks_;  // submission order; the finished ones form a prefix
  size_t started_ = 0;                       // tasks_[0, started_) have been handed to the writer
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace sjd::engine
