// The dense layers' gradient products: sgemm's B operand padded where rows sit a multiple of 2 KiB
// apart, and the gradients the same with and without the padded copies.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "core/gemm.hpp"
#include "core/rng.hpp"

using namespace strata;

namespace {

// a x b, as a count of values.
std::size_t count_of(int a, int b) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

std::vector<float> random_values(std::size_t count, Rng& rng) {
  std::vector<float> v(count);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

}  // namespace

TEST_CASE("sgemm's B operand is copied with padded rows only where they are 2 KiB apart",
          "[gemm]") {
  Rng rng(3);
  const int rows = 5, cols = 1000, ld = 1024;  // rows a stride of 4 KiB apart, 24 floats unused
  const std::vector<float> b = random_values(count_of(rows, ld), rng);

  GemmRowPadding padding(true);
  const GemmOperand padded = padding.operand(b.data(), rows, cols, ld);
  REQUIRE(padded.data != b.data());
  REQUIRE(padded.ld > ld);
  REQUIRE(padded.ld % 512 != 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) REQUIRE(padded.data[r * padded.ld + c] == b[r * ld + c]);

  // Rows 784 floats apart, a single row, or padding off: B as it is.
  for (const GemmOperand as_is :
       {padding.operand(b.data(), rows, 784, 784), padding.operand(b.data(), 1, cols, ld),
        GemmRowPadding(false).operand(b.data(), rows, cols, ld)}) {
    CHECK(as_is.data == b.data());
    CHECK((as_is.ld == ld || as_is.ld == 784));
  }
}

TEST_CASE("a dense layer's gradients are the direct sums, with and without padded operands",
          "[gemm]") {
  for (const int n_in : {512, 784, 1024}) {
    for (const int batch : {1, 3, 32}) {
      CAPTURE(n_in, batch);
      const int n_out = 24;
      Rng rng(static_cast<std::uint64_t>(n_in * 100 + batch));
      const auto x = random_values(count_of(batch, n_in), rng);
      const auto w = random_values(count_of(n_out, n_in), rng);
      const auto dy = random_values(count_of(batch, n_out), rng);

      std::vector<double> dw(count_of(n_out, n_in)), db(count_of(n_out, 1)),
          dx(count_of(batch, n_in));
      for (int b = 0; b < batch; ++b)
        for (int o = 0; o < n_out; ++o) {
          const double g = dy[count_of(b, n_out) + static_cast<std::size_t>(o)];
          db[static_cast<std::size_t>(o)] += g;
          for (int i = 0; i < n_in; ++i) {
            const std::size_t bi = count_of(b, n_in) + static_cast<std::size_t>(i);
            const std::size_t oi = count_of(o, n_in) + static_cast<std::size_t>(i);
            dw[oi] += g * x[bi];
            dx[bi] += g * w[oi];
          }
        }

      for (const bool pad : {false, true}) {
        CAPTURE(pad);
        std::vector<float> got_dw(dw.size(), 7.0f), got_db(db.size(), 7.0f),
            got_dx(dx.size(), 7.0f);
        GemmRowPadding padding(pad);
        dense_backward(batch, n_in, n_out, x.data(), w.data(), {dy.data(), n_out},
                       {got_dw.data(), got_db.data(), got_dx.data()}, padding);
        for (std::size_t i = 0; i < dw.size(); ++i)
          REQUIRE(got_dw[i] == Approx(dw[i]).margin(1e-4));
        for (std::size_t i = 0; i < db.size(); ++i)
          REQUIRE(got_db[i] == Approx(db[i]).margin(1e-4));
        for (std::size_t i = 0; i < dx.size(); ++i)
          REQUIRE(got_dx[i] == Approx(dx[i]).margin(1e-4));
      }
    }
  }
}
