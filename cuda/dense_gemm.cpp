#include "cuda/dense_gemm.hpp"

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace strata::cuda {

BlasHandle::BlasHandle(cudaStream_t stream) {
  check(cublasCreate(&handle_), "cublasCreate");
  check(cublasSetStream(handle_, stream), "cublasSetStream");
  // The products stay in fp32 (no TF32 tensor cores), so that they match the CPU's within 1e-4.
  check(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

BlasHandle::~BlasHandle() {
  if (handle_ != nullptr) static_cast<void>(cublasDestroy(handle_));
}

namespace {

int as_int(std::int64_t n) {
  return static_cast<int>(n);
}

}  // namespace

// cuBLAS is column-major: a row-major [r, c] matrix is its column-major [c, r] transpose, so each
// row-major product below is written as the product of the transposes.
void dense_forward(const BlasHandle& blas, const DenseShape& s, const float* in,
                   const float* weight, const float* bias, float* out, cudaStream_t stream) {
  const float one = 1.0f, zero = 0.0f;
  // out^T [outputs, batch] = weight [outputs, inputs] in^T [inputs, batch].
  check(cublasSgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, as_int(s.outputs), as_int(s.batch),
                    as_int(s.inputs), &one, weight, as_int(s.inputs), in, as_int(s.inputs), &zero,
                    out, as_int(s.outputs)),
        "cublasSgemm (dense forward)");
  if (bias != nullptr) add_row_bias(out, bias, s.batch, s.outputs, stream);
}

void dense_backward(const BlasHandle& blas, const DenseShape& s, const float* in,
                    const float* weight, const float* grad_out, float* weight_grad,
                    float* bias_grad, float* grad_in, cudaStream_t stream) {
  const float one = 1.0f, zero = 0.0f;
  // weight_grad^T [inputs, outputs] = in^T [inputs, batch] grad_out [batch, outputs].
  check(cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_T, as_int(s.inputs), as_int(s.outputs),
                    as_int(s.batch), &one, in, as_int(s.inputs), grad_out, as_int(s.outputs), &zero,
                    weight_grad, as_int(s.inputs)),
        "cublasSgemm (dense weight gradient)");
  column_sums(grad_out, bias_grad, s.batch, s.outputs, stream);
  if (grad_in == nullptr) return;
  // grad_in^T [inputs, batch] = weight^T [inputs, outputs] grad_out^T [outputs, batch].
  check(cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, as_int(s.inputs), as_int(s.batch),
                    as_int(s.outputs), &one, weight, as_int(s.inputs), grad_out, as_int(s.outputs),
                    &zero, grad_in, as_int(s.inputs)),
        "cublasSgemm (dense input gradient)");
}

}  // namespace strata::cuda
