#include "core/cpu_kernels.hpp"

#include <pmmintrin.h>
#include <xmmintrin.h>

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace strata {

namespace {

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

}  // namespace

KernelReport kernel_report() {
  KernelReport r;
  const dnnl_version_t* dnnl = dnnl_version();
  r.onednn_version =
      fmt::format("{}.{}.{} ({})", dnnl->major, dnnl->minor, dnnl->patch, dnnl->hash);
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  r.onednn_isa = isa_name(isa);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2");
  r.cpu_best = avx512 ? "avx512" : avx2 ? "avx2" : "sse";
  // The ISA values are bit masks: each includes the ones below it.
  const auto has = [isa](dnnl_cpu_isa_t level) { return (isa & level) == level; };
  r.onednn_weaker_than_cpu =
      (avx512 && !has(dnnl_cpu_isa_avx512_core)) || (avx2 && !has(dnnl_cpu_isa_avx2));
  if (r.onednn_weaker_than_cpu)
    r.warning = fmt::format(
        "oneDNN is limited to its '{}' kernels but this CPU supports {}; convolutions and dense "
        "layers will run 2-4x slower. Unset ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA.",
        r.onednn_isa, r.cpu_best);
  return r;
}

std::int64_t l2_cache_bytes() {
  const long reported = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return reported > 0 ? reported : std::int64_t{512} << 10;
}

void configure_kernel_thread() {
  omp_set_num_threads(1);
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
}

}  // namespace strata
