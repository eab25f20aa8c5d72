// Turns a failed CUDA runtime or cuBLAS call into an exception that names the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace strata::cuda {

// What a CUDA call failed with: the call, the error's name and its text.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check(cudaError_t status, const char* call);
void check(cublasStatus_t status, const char* call);

}  // namespace strata::cuda
