#include "jobs/stop_signals.hpp"

#include <atomic>
#include <cstring>
#include <stdexcept>

namespace strata {

namespace {

// A signal handler can reach nothing but static storage: this is the one process-wide flag, and
// only StopSignals writes or reads it. Lock-free, so that a handler running on any thread (worker,
// checkpoint writer) and the main thread reading it do not race.
std::atomic<int> received_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_signal(int signal) {
  received_signal = signal;
}

}  // namespace

StopSignals::StopSignals(int requeue_signal) : signals_{SIGTERM, SIGINT, requeue_signal} {
  received_signal = 0;
  struct sigaction action {};
  action.sa_handler = record_signal;
  sigemptyset(&action.sa_mask);
  // Interrupted reads and writes restart, so no I/O path has to expect EINTR.
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < handled; ++i)
    if (sigaction(signals_[i], &action, nullptr) != 0)
      throw std::runtime_error(std::string("cannot install a handler for signal ") +
                               signal_name(signals_[i]));
}

bool StopSignals::requested() const {
  return received_signal != 0;
}

int StopSignals::which() const {
  return received_signal;
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "TERM";
    case SIGINT:
      return "INT";
    case SIGUSR1:
      return "USR1";
    case SIGUSR2:
      return "USR2";
    case SIGHUP:
      return "HUP";
    default:
      return "?";
  }
}

}  // namespace strata
