// What the CPU kernels libraries picked on this machine, and the thread policy strata gives them.
#pragma once

#include <string>

namespace strata {

struct KernelReport {
  std::string openblas_core;  // openblas_get_corename(), e.g. "SkylakeX" or "Prescott"
  std::string cpu_best;       // the strongest vector extension the CPU reports
  bool openblas_weaker_than_cpu = false;
  std::string warning;  // non-empty when OpenBLAS picked a kernel weaker than the CPU supports
  std::string openblas_config;  // openblas_get_config(): version and build options
  std::string onednn_version;   // "2.6.0 (52b5f107...)"
};

KernelReport kernel_report();

// One thread per batch worker: BLAS and oneDNN run single-threaded inside each worker,
// because two libraries' thread pools on the same cores spin against each other.
void use_single_threaded_kernels();

}  // namespace strata
