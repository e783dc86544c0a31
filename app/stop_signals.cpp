#include "stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "engine/created_folders.h"
#include "io/unfinished_files.h"

namespace sjd::app {
namespace {

std::atomic<int> requested{0};  // lock-free, so safe to store from a handler and read from any thread
static_assert(std::atomic<int>::is_always_lock_free);
constexpr int kStopSignals[] = {SIGINT, SIGTERM};
bool installed[2] = {false, false};  // per kStopSignals entry; written before any handler can run

// Ends the process by `signal` as its default action would, but first removes what a finished command
// would not have left: the temporary files being written and the output folders it made and left empty.
extern "C" void on_ending_signal(int signal) {
  io::remove_unfinished_files_on_signal();  // first: a folder holding one is not empty
  engine::remove_empty_created_folders_on_signal();
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(signal, &fallback, nullptr);
  std::raise(signal);  // blocked while the handler runs: the process ends by it as the handler returns
}

extern "C" void on_stop_signal(int signal) {
  const int saved_errno = errno;  // write() may change it under the interrupted code
  requested.store(signal);
  struct sigaction fallback {};
  fallback.sa_handler = on_ending_signal;
  sigemptyset(&fallback.sa_mask);
  for (const int other : kStopSignals) sigaddset(&fallback.sa_mask, other);
  for (int k = 0; k < 2; ++k) {
    if (installed[k]) sigaction(kStopSignals[k], &fallback, nullptr);  // the next one ends the process
  }
  // `sjd batch ... | tee log`: Ctrl-C ends tee too, and the summary's write would then end sjd by
  // SIGPIPE before the manifests' counts are out; the write fails quietly instead.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, nullptr);
  static const char kInterrupt[] = "\nsjd: stopping after the images in flight (press Ctrl-C again to stop now)\n";
  static const char kTerminate[] = "\nsjd: stopping after the images in flight (a second signal stops now)\n";
  const bool interrupt = signal == SIGINT;
  const ssize_t written = ::write(STDERR_FILENO, interrupt ? kInterrupt : kTerminate,
                                  (interrupt ? sizeof kInterrupt : sizeof kTerminate) - 1);
  (void)written;  // nothing to do in a handler if stderr is gone
  errno = saved_errno;
}

}  // namespace

void install_cleanup_signals() {
  for (const int s : kStopSignals) {
    struct sigaction current {};
    sigaction(s, nullptr, &current);
    if (current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = on_ending_signal;
    sigemptyset(&action.sa_mask);
    for (const int other : kStopSignals) sigaddset(&action.sa_mask, other);  // one cleanup at a time
    sigaction(s, &action, nullptr);
  }
}

void install_stop_signals() {
  // Both handlers go in before either can run: a SIGINT between the two would otherwise see SIGTERM's
  // reset undone by its install.
  sigset_t both, before;
  sigemptyset(&both);
  for (const int s : kStopSignals) sigaddset(&both, s);
  pthread_sigmask(SIG_BLOCK, &both, &before);
  for (int k = 0; k < 2; ++k) {
    struct sigaction current {};
    sigaction(kStopSignals[k], nullptr, &current);
    if (current.sa_handler == SIG_IGN) continue;
    installed[k] = true;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a file write the signal interrupts goes on instead of failing
    sigaction(kStopSignals[k], &action, nullptr);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

int stop_signal() { return requested.load(); }

std::string stop_signal_name(int signal) { return signal == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM"; }

void end_by_stop_signal() {
  const int signal = requested.load();
  if (signal == 0) return;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(signal, &fallback, nullptr);
  std::raise(signal);
}

}  // namespace sjd::app
