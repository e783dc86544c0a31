#include "stop_signals.h"

#include <unistd.h>

#include <csignal>

namespace sjd::app {
namespace {

volatile std::sig_atomic_t requested = 0;
constexpr int kStopSignals[] = {SIGINT, SIGTERM};

extern "C" void on_stop_signal(int signal) {
  requested = signal;
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  for (const int s : kStopSignals) sigaction(s, &fallback, nullptr);  // the next one ends the process
  static const char kMessage[] = "\nsjd: stopping after the images in flight (press Ctrl-C again to stop now)\n";
  const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  (void)written;  // nothing to do in a handler if stderr is gone
}

}  // namespace

void install_stop_signals() {
  for (const int s : kStopSignals) {
    struct sigaction current {};
    sigaction(s, nullptr, &current);
    if (current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // a file write the signal interrupts goes on instead of failing
    sigaction(s, &action, nullptr);
  }
}

int stop_signal() { return requested; }

}  // namespace sjd::app
