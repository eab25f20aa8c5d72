#include "core/cpu_kernels.hpp"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <fmt/format.h>

namespace strata {

KernelReport kernel_report() {
  KernelReport r;
  r.openblas_core = openblas_get_corename();
  r.openblas_config = openblas_get_config();
  const dnnl_version_t* dnnl = dnnl_version();
  r.onednn_version =
      fmt::format("{}.{}.{} ({})", dnnl->major, dnnl->minor, dnnl->patch, dnnl->hash);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2");
  r.cpu_best = avx512 ? "avx512" : avx2 ? "avx2" : "sse";
  const std::string& core = r.openblas_core;
  const bool core_avx512 = core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
  const bool core_avx2 = core_avx512 || core == "Haswell" || core == "Zen";
  r.openblas_weaker_than_cpu = (avx512 && !core_avx512 && !core_avx2) || (avx2 && !core_avx2);
  if (r.openblas_weaker_than_cpu)
    r.warning = fmt::format(
        "OpenBLAS picked its '{}' kernels but this CPU supports {}; dense layers will run 3-4x "
        "slower. "
        "Set OPENBLAS_CORETYPE={} before starting strata (jobs/*.sh do).",
        core, r.cpu_best, avx512 ? "SkylakeX" : "Haswell");
  return r;
}

void use_single_threaded_kernels() {
  openblas_set_num_threads(1);
  omp_set_num_threads(1);
}

}  // namespace strata
