#include "core/gemm.hpp"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

void sgemm(Transpose a, Transpose b, int m, int n, int k, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(a == Transpose::yes ? 'T' : 'N', b == Transpose::yes ? 'T' : 'N', m, n, k, alpha,
                 A, lda, B, ldb, beta, C, ldc);
  if (status != dnnl_success)
    throw std::runtime_error(
        fmt::format("oneDNN sgemm refused m {} n {} k {} (lda {} ldb {} ldc {}): status {}", m, n,
                    k, lda, ldb, ldc, static_cast<int>(status)));
}

bool sgemm_below_avx512() {
  // The ISA values are bit masks: each includes the ones below it.
  return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
}

GemmOperand GemmRowPadding::operand(const float* b, int rows, int cols, int ld) {
  constexpr int rows_apart = 512;  // floats: 2 KiB
  constexpr int pad = 16;          // floats: one cache line
  if (!pad_ || ld % rows_apart != 0 || rows < 2) return {b, ld};
  const int padded = ld + pad;
  // Grown, never shrunk: the two products' operands take turns here, and a vector grown again
  // zero-fills what it gains (1.3% of a training step of the benchmark CNN at batch 64).
  const std::size_t needed = static_cast<std::size_t>(rows) * static_cast<std::size_t>(padded);
  if (copy_.size() < needed) copy_.resize(needed);
  for (int r = 0; r < rows; ++r)
    std::copy_n(b + static_cast<std::ptrdiff_t>(r) * ld, cols,
                copy_.data() + static_cast<std::ptrdiff_t>(r) * padded);
  return {copy_.data(), padded};
}

void dense_backward(int batch, int n_in, int n_out, const float* in, const float* weight,
                    GemmOperand grad_out, const DenseGradients& grads, GemmRowPadding& padding) {
  const float* dy = grad_out.data;
  const int dy_ld = grad_out.ld;
  // dW[o,i] = sum_b dy[b,o] * x[b,i]
  const GemmOperand x = padding.operand(in, batch, n_in, n_in);
  sgemm(Transpose::yes, Transpose::no, n_out, n_in, batch, 1.0f, dy, dy_ld, x.data, x.ld, 0.0f,
        grads.weight_grad, n_in);
  float* db = grads.bias_grad;
  std::fill_n(db, n_out, 0.0f);
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < n_out; ++o) db[o] += dy[b * dy_ld + o];
  if (grads.input_grad != nullptr) {
    // dx[b,i] = sum_o dy[b,o] * W[o,i]
    const GemmOperand w = padding.operand(weight, n_out, n_in, n_in);
    sgemm(Transpose::no, Transpose::no, batch, n_in, n_out, 1.0f, dy, dy_ld, w.data, w.ld, 0.0f,
          grads.input_grad, n_in);
  }
}

}  // namespace strata
