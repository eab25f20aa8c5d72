// The dense layers' gradient products (dense_backward) with and without GemmRowPadding's copies,
// on one thread, taking turns in one run, for the inputs the models here use (256 to 2048) at 32
// and 128 samples. Buffers are 4 KiB aligned, as large tensors are. Prints a Markdown table;
// `ONEDNN_MAX_CPU_ISA=AVX2 build/strata_bench_dense_gradients` shows what an AVX2 CPU runs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/gemm.hpp"
#include "core/measurement.hpp"
#include "tests/bench/one_thread_bench.hpp"

namespace {

// `count` floats from a 4 KiB boundary inside `storage`.
float* aligned_floats(std::vector<float>& storage, std::size_t count) {
  storage.assign(count + 4096 / sizeof(float), 0.25f);
  void* at = storage.data();
  std::size_t space = storage.size() * sizeof(float);
  return static_cast<float*>(std::align(4096, count * sizeof(float), at, space));
}

// Milliseconds per dense_backward call, the median of `rounds` rounds of `calls` calls.
double time_backward(int batch, int n_in, int n_out, bool pad, int rounds, int calls) {
  const auto rows = static_cast<std::size_t>(batch), in = static_cast<std::size_t>(n_in),
             out = static_cast<std::size_t>(n_out);
  std::vector<std::vector<float>> storage(6);
  float* const x = aligned_floats(storage[0], rows * in);
  float* const w = aligned_floats(storage[1], out * in);
  float* const dy = aligned_floats(storage[2], rows * out);
  float* const dw = aligned_floats(storage[3], out * in);
  float* const db = aligned_floats(storage[4], out);
  float* const dx = aligned_floats(storage[5], rows * in);
  strata::GemmRowPadding padding(pad);
  return strata::bench::ms_per_call(
      [&] {
        strata::dense_backward(batch, n_in, n_out, x, w, {dy, n_out}, {dw, db, dx}, padding);
      },
      rounds, calls);
}

}  // namespace

int main() {
  const std::string isa = strata::bench::start_one_thread_bench();
  fmt::print(
      "Dense layer gradients (dW = dy^T x, db, dx = dy W; 256 outputs) on one thread, oneDNN on "
      "{}: "
      "B operands as they are against GemmRowPadding's copies (included in the time), median of 3 "
      "turns of 5 x 20 calls each.\n\n",
      isa);
  fmt::print("| inputs | samples | as they are, ms | padded copies, ms | as they are / padded |\n");
  fmt::print("| --- | --- | --- | --- | --- |\n");
  constexpr int n_out = 256;
  for (const int n_in : {256, 512, 784, 1024, 2048})
    for (const int batch : {32, 128}) {
      std::vector<double> plain, padded;
      for (int turn = 0; turn < 3; ++turn) {
        plain.push_back(time_backward(batch, n_in, n_out, false, 5, 20));
        padded.push_back(time_backward(batch, n_in, n_out, true, 5, 20));
      }
      const double a = strata::median(plain), b = strata::median(padded);
      fmt::print("| {} | {} | {:.3f} | {:.3f} | {:.2f} |\n", n_in, batch, a, b, a / b);
    }
  return EXIT_SUCCESS;
}
