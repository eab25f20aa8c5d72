#include "jobs/stop_signals.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

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

// The one thread that takes stop signals, started once and kept until the process ends. Every
// thread that runs kernels blocks them: oneDNN 2.x's JIT sgemm points the stack pointer into a heap
// workspace while it runs (fixed in oneDNN 3.11), so a signal delivered there writes its frame over
// heap blocks below it, and the process crashes later in free(). Stop signals forwarded by mpiexec
// or Slurm hit a dense layer often enough to make that a crash every few runs.
void start_signal_thread() {
  static std::once_flag started;
  std::call_once(started, [] {
    std::thread([] {
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      for (;;) pause();  // record_signal runs here
    }).detach();
  });
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
  // Blocked on this thread and on every thread it starts from now on (batch workers, checkpoint
  // writers). A thread started earlier (the MPI library's) may still take one: it runs no kernels.
  sigset_t stops;
  sigemptyset(&stops);
  for (int i = 0; i < handled; ++i) sigaddset(&stops, signals_[i]);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  start_signal_thread();
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
