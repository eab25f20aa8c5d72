#include "core/gemm.hpp"

#include <oneapi/dnnl/dnnl.h>

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

}  // namespace strata
