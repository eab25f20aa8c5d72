// Stop signals (SIGTERM, SIGINT and the configured requeue signal) as a flag that training reads at
// step boundaries: the handler does nothing else.
#pragma once

#include <csignal>

namespace strata {

// Installs the handlers, which stay until the process ends: a stop signal that arrives after the
// run decided its exit code (the launcher stopping the other ranks while this one finalizes MPI)
// must not kill the process and turn exit 75 into death by the signal. One at a time. The signals
// are blocked on the constructing thread and the threads it starts later, and taken by a thread of
// their own (jobs/stop_signals.cpp says why): send them to the process (kill), not to a thread
// (raise).
class StopSignals {
 public:
  explicit StopSignals(int requeue_signal);
  ~StopSignals() = default;
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a stop signal has arrived, and which (0: none).
  bool requested() const;
  int which() const;

 private:
  static constexpr int handled = 3;
  int signals_[handled];
};

// The name of a signal number ("USR1", "TERM").
const char* signal_name(int signal);

}  // namespace strata
