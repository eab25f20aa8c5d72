// Stop signals (SIGTERM, SIGINT and the configured requeue signal) as a flag that training reads at
// step boundaries: the handler does nothing else.
#pragma once

#include <csignal>

namespace strata {

// Installs the handlers for as long as it lives; the previous ones come back after. One at a time.
class StopSignals {
 public:
  explicit StopSignals(int requeue_signal);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a stop signal has arrived, and which (0: none).
  bool requested() const;
  int which() const;

 private:
  static constexpr int handled = 3;
  int signals_[handled];
  struct sigaction previous_[handled];
};

// The name of a signal number ("USR1", "TERM").
const char* signal_name(int signal);

}  // namespace strata
