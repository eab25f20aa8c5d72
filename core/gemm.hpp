// Matrix multiplies of the dense layers, on oneDNN's sgemm: it picks its kernels from the CPU's
// features when it runs, so no result depends on a BLAS's build or on OPENBLAS_CORETYPE.
#pragma once

namespace strata {

enum class Transpose { no, yes };

// C = alpha op(A) op(B) + beta C, row-major: op(A) is m x k, op(B) is k x n, C is m x n; lda, ldb
// and ldc are the row strides of A, B and C as stored. Single-threaded inside a batch worker
// (configure_kernel_thread). Throws std::runtime_error when oneDNN refuses the arguments.
void sgemm(Transpose a, Transpose b, int m, int n, int k, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace strata
