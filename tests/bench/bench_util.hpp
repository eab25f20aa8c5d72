// Small pieces every benchmark uses: medians, figures grouped by thousands, an idle barrier.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/measurement.hpp"

namespace strata::bench {

using strata::cpu_model_name;
using strata::median;

// 12345.6 -> "12 346", as the README writes figures.
inline std::string grouped(double value) {
  const auto digits = fmt::format("{:.0f}", value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ' ';
    out += digits[i];
  }
  return out;
}

inline std::string repeats_string(const std::vector<double>& v) {
  std::string s;
  for (double x : v) {
    if (!s.empty()) s += ' ';
    s += fmt::format("{:.0f}", x);
  }
  return s;
}

inline const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// A barrier that sleeps while it waits: MPICH's blocking barrier polls on a core, which on a
// 2-core machine would take the core a rank measuring alone does not use.
inline void idle_barrier(MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// What core_round_trip_ns reads where it was measured, for the benches' output to say.
inline constexpr const char* core_round_trip_legend =
    "on the 2-vCPU EPYC guests 75-140 ns while the host keeps the two vCPUs on one L3 and "
    "320-470 ns while it does not";

// Median nanoseconds for a cache line to go from this thread's core to another thread's and back,
// the two taking turns on one atomic. On a VM it tells where the host put the vCPUs (see
// core_round_trip_legend), a placement that changes every few seconds and slows whatever moves
// cache lines between the cores.
inline double core_round_trip_ns(double seconds = 0.2) {
  alignas(64) std::atomic<std::int64_t> turn{0};
  alignas(64) std::atomic<bool> stop{false};
  std::thread other([&] {
    for (std::int64_t mine = 1;; mine += 2) {
      while (turn.load(std::memory_order_acquire) != mine)
        if (stop.load(std::memory_order_relaxed)) return;
      turn.store(mine + 1, std::memory_order_release);
    }
  });
  using Clock = std::chrono::steady_clock;
  constexpr int batch = 1000;
  std::vector<double> ns;
  std::int64_t last = 0;
  for (const auto until = Clock::now() + std::chrono::duration<double>(seconds);
       Clock::now() < until;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < batch; ++i) {
      turn.store(last + 1, std::memory_order_release);
      last += 2;
      while (turn.load(std::memory_order_acquire) != last) {
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / batch);
  }
  stop.store(true);
  other.join();
  return median(ns);
}

}  // namespace strata::bench
