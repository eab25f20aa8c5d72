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

// This rank's index among the ranks of its node, as the launcher numbers them (MPICH's hydra,
// Open MPI, Cray PALS, Slurm's srun set it in the environment); `fallback` where none does.
int node_local_rank(int fallback);

// Whether a rank trains its forward and backward passes on a GPU: `auto` when `devices` has one,
// `cuda` likewise or a ConfigError that says why not, `cpu` never. Every rank decides for itself
// (the M shards of a split model then agree: all on GPUs or all on the CPU); replicas that decide
// differently still train alike (their gradients are then summed on the host).
bool trains_on_gpu(DeviceChoice choice, const DeviceReport& devices);

}  // namespace strata
