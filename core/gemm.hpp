// Matrix multiplies of the dense layers, on oneDNN's sgemm: it picks its kernels from the CPU's
// features when it runs, so no result depends on a BLAS's build or on OPENBLAS_CORETYPE.
#pragma once

#include <vector>

namespace strata {

enum class Transpose { no, yes };

// C = alpha op(A) op(B) + beta C, row-major: op(A) is m x k, op(B) is k x n, C is m x n; lda, ldb
// and ldc are the row strides of A, B and C as stored. Single-threaded inside a worker thread
// (configure_kernel_thread). Throws std::runtime_error when oneDNN refuses the arguments.
void sgemm(Transpose a, Transpose b, int m, int n, int k, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

// Whether oneDNN runs below its AVX-512 kernels here (an AVX2 CPU, or ONEDNN_MAX_CPU_ISA).
bool sgemm_below_avx512();

// A matrix as sgemm should read it: where it is and its row stride.
struct GemmOperand {
  const float* data;
  int ld;
};

// Copies of sgemm's non-transposed B operand, with the rows 64 bytes further apart, where oneDNN's
// AVX2 kernels would read it in place with rows a multiple of 2 KiB apart: such rows fall into the
// same few L1 sets and evict each other. The dense layers' gradient products on 1024 inputs ran
// 1.8-2.3 times faster from a padded copy, the copy included (1.3-1.6 on 512 inputs); AVX-512's
// kernels copy such operands themselves and lost 5-20% to the extra copy. Holds the last copy.
class GemmRowPadding {
 public:
  // `pad`: whether to copy such operands at all.
  explicit GemmRowPadding(bool pad = sgemm_below_avx512()) : pad_(pad) {}
  // B (rows x cols, row stride ld): itself, or a padded copy that stays valid until the next call.
  GemmOperand operand(const float* b, int rows, int cols, int ld);

 private:
  bool pad_;
  std::vector<float> copy_;
};

// The gradients of out = in W^T + b for a batch (W stored [n_out, n_in]): dW and db from dy and
// the input; dx (when not null) from dy and W. dy's row stride may exceed n_out: a thread's
// columns of a wider layer's output gradient. `padding` serves both products' B operands.
struct DenseGradients {
  float* weight_grad;
  float* bias_grad;
  float* input_grad;  // may be null
};
void dense_backward(int batch, int n_in, int n_out, const float* in, const float* weight,
                    GemmOperand grad_out, const DenseGradients& grads, GemmRowPadding& padding);

}  // namespace strata
