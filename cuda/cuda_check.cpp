#include "cuda/cuda_check.hpp"

#include <fmt/format.h>

namespace strata::cuda {

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw CudaError(fmt::format("{} failed: {} ({}: {})", call, static_cast<int>(status),
                                cudaGetErrorName(status), cudaGetErrorString(status)));
}

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(fmt::format("{} failed: {} ({})", call, static_cast<int>(status),
                                cublasGetStatusString(status)));
}

}  // namespace strata::cuda
