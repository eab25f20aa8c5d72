#include "core/device.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "core/errors.hpp"

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
  if (count == 0) {
    r.summary = "CPU (no CUDA GPU visible)";
    r.detail = "the CUDA runtime sees no GPU";
    return r;
  }
  cudaDeviceProp props{};
  const bool named = cudaGetDeviceProperties(&props, 0) == cudaSuccess;
  r.detail = fmt::format("{} CUDA GPU(s) visible{}", count,
                         named ? fmt::format(" ({})", props.name) : std::string());
  r.summary = fmt::format("CPU ({})", r.detail);
#else
  r.summary = "CPU (built without CUDA)";
  r.detail = "built without CUDA";
#endif
  return r;
}

int node_local_rank(int fallback) {
  for (const char* name :
       {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0) return static_cast<int>(rank);
  }
  return fallback;
}

bool built_with_cuda() {
#ifdef STRATA_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool trains_on_gpu(DeviceChoice choice, const DeviceReport& devices) {
  if (choice == DeviceChoice::cpu) return false;
  const bool gpu_here = devices.cuda_built && devices.cuda_devices > 0;
  if (choice == DeviceChoice::cuda && !gpu_here)
    throw ConfigError(
        fmt::format("run.device: cuda, but this rank has no GPU to train on: {}",
                    devices.cuda_built ? devices.detail : std::string("built without CUDA")));
  return gpu_here;
}

}  // namespace strata
