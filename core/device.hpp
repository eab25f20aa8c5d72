// Which compute devices this build can use and what it finds at run time.
#pragma once

#include <string>

#include "core/config.hpp"

namespace strata {

struct DeviceReport {
  bool cuda_built = false;  // compiled with the CUDA runtime (STRATA_CUDA)
  int cuda_devices = 0;     // GPUs the CUDA runtime reports
  std::string summary;      // a few words for the console, saying where training runs
  std::string detail;       // what the CUDA runtime answered, for run.json
};

// Never fails: a machine without a GPU or driver gets a report that says so.
DeviceReport detect_devices();

// Whether this build has the CUDA backend.
bool built_with_cuda();

// Whether a rank trains its forward and backward passes on a GPU: `auto` when `devices` has one
// and the model is not split (model-parallel layers run on the CPU), `cuda` likewise or a
// ConfigError that says why not, `cpu` never. Every rank decides for itself; ranks of one group
// that decide differently still train alike, since the optimizer and the gradient sums stay on
// the CPU.
bool trains_on_gpu(DeviceChoice choice, int model_shards, const DeviceReport& devices);

}  // namespace strata
