// What the one-thread kernel benchmarks share: the kernels set up as in a batch worker, and the
// milliseconds a call takes.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/conv_geometry.hpp"
#include "core/cpu_kernels.hpp"
#include "core/gemm.hpp"
#include "core/measurement.hpp"
#include "core/tensor.hpp"

namespace strata::bench {

// One kernel thread, as inside a batch worker; prints the CPU and what oneDNN dispatches to on
// stderr, and returns oneDNN's ISA for the table's heading.
inline std::string start_one_thread_bench() {
  configure_kernel_thread();
  const KernelReport kernels = kernel_report();
  fmt::print(stderr, "[bench] {}; oneDNN {} on {} (CPU: {})\n", cpu_model_name(),
             kernels.onednn_version, kernels.onednn_isa, kernels.cpu_best);
  return kernels.onednn_isa;
}

// The channel blocks a conv layer keeps its activations in: oneDNN's 8 below its AVX-512
// kernels, else 16.
inline Layout layer_activation_layout() {
  return sgemm_below_avx512() ? Layout::channel_blocked8 : Layout::channel_blocked16;
}

// GFLOP of one forward pass of the conv `g` (a gradient's product costs the same).
inline double conv_gflop(const ConvGeometry& g) {
  return 2.0 *
         static_cast<double>(g.batch * g.filters * g.out_h * g.out_w * g.channels * g.kernel *
                             g.kernel) *
         1e-9;
}

// Milliseconds per call of `run`: the median over `rounds` of the mean of `calls` calls. With
// `before_each`, that runs untimed before every call (and the calls are timed one by one).
inline double ms_per_call(const std::function<void()>& run, int rounds, int calls,
                          const std::function<void()>& before_each = {}) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> means;
  for (int r = 0; r < rounds; ++r) {
    double ms = 0.0;
    if (before_each) {
      for (int c = 0; c < calls; ++c) {
        before_each();
        const auto start = Clock::now();
        run();
        ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      }
    } else {
      const auto start = Clock::now();
      for (int c = 0; c < calls; ++c) run();
      ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    means.push_back(ms / calls);
  }
  return median(means);
}

}  // namespace strata::bench
