// The benchmark CNN's second conv's weight gradient as forward convolutions (ConvWeightGradient)
// over pieces of the batch, on one thread, the piece sizes taking turns in one run: the whole batch
// in one convolution against pieces of 64, 32, 16 and 8 samples and the default. Activations in the
// channel blocks the layer keeps (8 below AVX-512, else 16). Prints a Markdown table;
// `ONEDNN_MAX_CPU_ISA=AVX2 build/strata_bench_conv_weight_gradient` shows AVX2's.
#include <dnnl.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/conv_weight_grad.hpp"
#include "core/dnnl_layout.hpp"
#include "core/measurement.hpp"
#include "tests/bench/one_thread_bench.hpp"

namespace {

// Milliseconds per call for each piece size, the sizes taking turns; 0 is the default.
std::vector<double> time_pieces(const strata::ConvGeometry& g, strata::Layout layout,
                                const std::vector<std::int64_t>& pieces) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto x_desc = strata::activation_desc(g.batch, g.channels, g.in_h, g.in_w, layout);
  const auto dy_desc = strata::activation_desc(g.batch, g.filters, g.out_h, g.out_w, layout);
  std::vector<float> x(x_desc.get_size() / sizeof(float)), dy(dy_desc.get_size() / sizeof(float)),
      dw(static_cast<std::size_t>(g.filters * g.channels * g.kernel * g.kernel));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.01f;
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i % 7) * 0.001f;
  std::vector<strata::ConvWeightGradient> ways;
  for (const std::int64_t piece : pieces) {
    ways.emplace_back(g, x_desc, dy_desc, engine, piece);
    if (!ways.back().fast())
      throw std::runtime_error(
          fmt::format("no fast forward kernel for pieces of {} samples", piece));
  }
  std::vector<std::vector<double>> turns(pieces.size());
  for (int turn = 0; turn < 3; ++turn)
    for (std::size_t w = 0; w < ways.size(); ++w)
      turns[w].push_back(strata::bench::ms_per_call(
          [&] { ways[w].compute(x.data(), dy.data(), dw.data(), stream); }, 7, 10));
  std::vector<double> ms;
  for (auto& t : turns) ms.push_back(strata::median(t));
  return ms;
}

}  // namespace

int run() {
  const std::string isa = strata::bench::start_one_thread_bench();
  const strata::Layout layout = strata::bench::layer_activation_layout();
  const strata::ConvGeometry shape{0, 32, 12, 12, 64, 5, 1, 0, 8, 8};
  fmt::print(
      "Weight gradient of the benchmark CNN's second conv (32 -> 64 channels, 5x5, 12x12 input) "
      "on one thread as forward convolutions over pieces of the batch, oneDNN on {}, activations "
      "in {}-channel blocks; median of 3 turns of 7 x 10 calls each, ms per call (GFLOP/s). The "
      "default piece here: {} samples.\n\n",
      isa, strata::channel_block(layout), strata::ConvWeightGradient::default_piece_samples(shape));
  const std::vector<std::int64_t> pieces{1 << 20, 64, 32, 16, 8, 0};
  fmt::print(
      "| samples | whole batch | pieces of 64 | of 32 | of 16 | of 8 | default | whole / default "
      "|\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const std::int64_t batch : {32, 128}) {
    strata::ConvGeometry g = shape;
    g.batch = batch;
    const std::vector<double> ms = time_pieces(g, layout, pieces);
    const double gflop = strata::bench::conv_gflop(g);
    std::string row = fmt::format("| {} |", batch);
    for (const double t : ms) row += fmt::format(" {:.3f} ({:.0f}) |", t, gflop / t * 1e3);
    fmt::print("{} {:.2f} |\n", row, ms.front() / ms.back());
  }
  return EXIT_SUCCESS;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_bench_conv_weight_gradient: %s\n", e.what());
    return EXIT_FAILURE;
  }
}
