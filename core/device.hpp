// Which compute devices this build can use and what it finds at run time.
#pragma once

#include <string>

namespace strata {

struct DeviceReport {
  bool cuda_built = false;  // compiled with the CUDA runtime (STRATA_CUDA)
  int cuda_devices = 0;     // GPUs the CUDA runtime reports
  std::string summary;      // a few words for the console, saying where training runs
  std::string detail;       // what the CUDA runtime answered, for run.json
};

// Never fails: a machine without a GPU or driver gets a report that says so.
DeviceReport detect_devices();

}  // namespace strata
