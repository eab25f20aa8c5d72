#include "core/device.hpp"

#include <fmt/format.h>

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace strata {

DeviceReport detect_devices() {
  DeviceReport r;
#ifdef STRATA_HAVE_CUDA
  r.cuda_built = true;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // Error 35 (insufficient driver) is what a machine without a GPU answers.
    // A CPU machine says this on every run: the console gets the outcome, run.json the reason.
    r.summary = "CPU (no usable GPU)";
    r.detail = fmt::format("the CUDA runtime found no usable GPU: {} {}", static_cast<int>(status),
                           cudaGetErrorString(status));
    return r;
  }
  r.cuda_devices = count;
  r.summary =
      count > 0 ? fmt::format("CPU ({} CUDA GPU(s) visible; this version's kernels run on the CPU)",
                              count)
                : std::string("CPU (no CUDA GPU visible)");
#else
  r.summary = "CPU (built without CUDA)";
  r.detail = "built without CUDA";
#endif
  return r;
}

}  // namespace strata
