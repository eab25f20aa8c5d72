// Small pieces every benchmark uses: medians, figures grouped by thousands, an idle barrier.
#pragma once

#include <mpi.h>

#include <chrono>
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

}  // namespace strata::bench
