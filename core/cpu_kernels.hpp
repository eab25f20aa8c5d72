// What the CPU kernel library (oneDNN) dispatches to on this machine, and the thread policy strata
// gives it.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

struct KernelReport {
  std::string cpu_best;    // the strongest vector extension the CPU reports: avx512, avx2, sse
  std::string onednn_isa;  // what oneDNN's convolutions and sgemm dispatch to: "avx512_core_bf16"
  std::string onednn_version;  // "2.6.3 (52b5f107...)"
  bool onednn_weaker_than_cpu = false;
  // Non-empty when oneDNN is capped below the CPU (ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA).
  std::string warning;
};

KernelReport kernel_report();

// One core's L2 cache in bytes as the OS reports it, or 512 KiB (the smallest L2 of the x86 cores
// strata meets) where it reports none.
std::int64_t l2_cache_bytes();

// Sets up the calling thread for kernels (threads it starts inherit it):
// - oneDNN runs single-threaded inside each batch worker, because a library's thread pool on the
//   same cores would spin against the workers;
// - denormal floats are flushed to zero: as training goes on, small gradients and momenta turn
//   denormal and each operation on them takes a microcode assist (a steady 20% slowdown from the
//   third epoch of configs/parallel.yaml without this).
void configure_kernel_thread();

}  // namespace strata
