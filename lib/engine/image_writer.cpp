#include "engine/image_writer.h"

#include <algorithm>
#include <utility>

namespace sjd::engine {

ImageWriter::ImageWriter(size_t max_pending) : max_pending_(std::max<size_t>(max_pending, 1)) {
  writer_ = std::thread([this] { work(); });
}

ImageWriter::~ImageWriter() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_writer_.notify_all();
  writer_.join();
}

void ImageWriter::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_writer_.wait(lock, [this] { return stopping_ || started_ < tasks_.size(); });
    if (stopping_) return;
    const std::shared_ptr<Task> task = tasks_[started_++];
    lock.unlock();
    try {
      task->seconds = task->write();
    } catch (...) {
      task->failure = std::current_exception();
    }
    lock.lock();
    task->finished = true;
    write_finished_.notify_all();
  }
}

void ImageWriter::submit(Write write, Completion completion) {
  auto task = std::make_shared<Task>();
  task->write = std::move(write);
  task->completion = std::move(completion);
  for (;;) {
    collect();
    std::unique_lock<std::mutex> lock(mutex_);
    if (tasks_.size() < max_pending_) {
      tasks_.push_back(std::move(task));
      wake_writer_.notify_one();
      return;
    }
    // Full: wait for the oldest write, whose completion the next round runs.
    write_finished_.wait(lock, [this] { return tasks_.front()->finished; });
  }
}

void ImageWriter::collect() {
  // One task at a time out of the queue: a completion that throws leaves the later ones queued.
  for (;;) {
    std::shared_ptr<Task> task;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (tasks_.empty() || !tasks_.front()->finished) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      --started_;
    }
    task->completion(task->seconds, task->failure);
  }
}

void ImageWriter::drain() {
  for (;;) {
    collect();
    std::unique_lock<std::mutex> lock(mutex_);
    if (tasks_.empty()) return;
    write_finished_.wait(lock, [this] { return tasks_.front()->finished; });
  }
}

size_t ImageWriter::pending() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return tasks_.size();
}

}  // namespace sjd::engine
