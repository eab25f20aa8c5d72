// Wall-clock seconds for progress lines, timings and time limits.
#pragma once

#include <chrono>

namespace strata {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace strata
