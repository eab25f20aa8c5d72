// The dense layer's three products on cuBLAS, in the CPU layer's row-major layout (in [batch,
// inputs], weight [outputs, inputs], out [batch, outputs]), and the cuBLAS handle that runs them.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

// A cuBLAS handle bound to one stream, destroyed with its owner.
class BlasHandle {
 public:
  explicit BlasHandle(cudaStream_t stream);
  ~BlasHandle();
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

struct DenseShape {
  std::int64_t batch = 0, inputs = 0, outputs = 0;
};

// out = in weight^T + bias (DenseLayer::forward); a null bias adds none (a row-split layer adds
// its bias after the sum over its shards).
void dense_forward(const BlasHandle& blas, const DenseShape& shape, const float* in,
                   const float* weight, const float* bias, float* out, cudaStream_t stream);
// weight_grad = grad_out^T in and bias_grad = the column sums of grad_out, both overwritten, and,
// unless grad_in is null, grad_in = grad_out weight (DenseLayer::backward).
void dense_backward(const BlasHandle& blas, const DenseShape& shape, const float* in,
                    const float* weight, const float* grad_out, float* weight_grad,
                    float* bias_grad, float* grad_in, cudaStream_t stream);

}  // namespace strata::cuda
