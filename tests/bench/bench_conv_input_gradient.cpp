// The benchmark CNN's second conv's input gradient both ways a layer can compute it, on one thread
// and taking turns in one run: ConvInputGradient (an sgemm per tile of samples and a scatter-add)
// and oneDNN's backward-data primitive, each with the weights reordered per call as the layer
// does. Activations in the channel blocks the layer keeps (8 below AVX-512, else 16). Prints a
// Markdown table; `ONEDNN_MAX_CPU_ISA=AVX2 build/strata_bench_conv_input_gradient` shows AVX2's.
#include <dnnl.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/conv_input_grad.hpp"
#include "core/dnnl_layout.hpp"
#include "core/measurement.hpp"
#include "tests/bench/one_thread_bench.hpp"

namespace {

using dnnl::memory;

struct Timings {
  double by_gemm, by_onednn;
  std::string onednn_kernel;
};

Timings time_both(const strata::ConvGeometry& g, strata::Layout layout) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto src = strata::activation_desc(g.batch, g.channels, g.in_h, g.in_w, layout);
  const auto dst = strata::activation_desc(g.batch, g.filters, g.out_h, g.out_w, layout);
  const memory::desc weights_plain({g.filters, g.channels, g.kernel, g.kernel},
                                   memory::data_type::f32, memory::format_tag::oihw);
  const memory::desc weights_any({g.filters, g.channels, g.kernel, g.kernel},
                                 memory::data_type::f32, memory::format_tag::any);
  const memory::dims strides{g.stride, g.stride}, pads{g.padding, g.padding};
  const dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src, weights_any, dst,
                                      strides, pads, pads),
      engine);
  const dnnl::convolution_backward_data::primitive_desc bwd(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src, weights_any,
                                            dst, strides, pads, pads),
      engine, fwd);

  std::vector<float> dy(dst.get_size() / sizeof(float), 0.01f),
      w(weights_plain.get_size() / sizeof(float), 0.02f), dx(src.get_size() / sizeof(float));
  memory dy_m(dst, engine, dy.data()), w_user(weights_plain, engine, w.data()),
      w_m(bwd.weights_desc(), engine), dx_m(src, engine, dx.data());
  const dnnl::reorder to_weights(w_user, w_m);
  const dnnl::convolution_backward_data backward(bwd);
  strata::ConvInputGradient by_gemm(g, layout, layout, engine);

  Timings t{};
  t.onednn_kernel = bwd.impl_info_str();
  std::vector<double> gemm, onednn;
  for (int turn = 0; turn < 3; ++turn) {
    gemm.push_back(strata::bench::ms_per_call(
        [&] { by_gemm.compute(dy.data(), w.data(), dx.data(), stream); }, 7, 10));
    onednn.push_back(strata::bench::ms_per_call(
        [&] {
          to_weights.execute(stream, w_user, w_m);
          backward.execute(
              stream,
              {{DNNL_ARG_DIFF_DST, dy_m}, {DNNL_ARG_WEIGHTS, w_m}, {DNNL_ARG_DIFF_SRC, dx_m}});
          stream.wait();
        },
        7, 10));
  }
  t.by_gemm = strata::median(gemm);
  t.by_onednn = strata::median(onednn);
  return t;
}

}  // namespace

int run() {
  const std::string isa = strata::bench::start_one_thread_bench();
  const strata::Layout layout = strata::bench::layer_activation_layout();
  fmt::print(
      "Input gradient of the benchmark CNN's second conv (32 -> 64 channels, 5x5, 12x12 input) "
      "on one thread, oneDNN on {}, activations in {}-channel blocks: ConvInputGradient against "
      "oneDNN's backward-data primitive, median of 3 turns of 7 x 10 calls each.\n\n",
      isa, strata::channel_block(layout));
  fmt::print(
      "| samples | by GEMM, ms | GFLOP/s | oneDNN's backward data, ms | GFLOP/s | oneDNN / GEMM |\n"
      "| --- | --- | --- | --- | --- | --- |\n");
  for (const std::int64_t batch : {32, 128}) {
    const strata::ConvGeometry g{batch, 32, 12, 12, 64, 5, 1, 0, 8, 8};
    const Timings t = time_both(g, layout);
    const double gflop = strata::bench::conv_gflop(g);
    fmt::print("| {} | {:.3f} | {:.0f} | {:.3f} ({}) | {:.0f} | {:.2f} |\n", batch, t.by_gemm,
               gflop / t.by_gemm * 1e3, t.by_onednn, t.onednn_kernel, gflop / t.by_onednn * 1e3,
               t.by_onednn / t.by_gemm);
  }
  return EXIT_SUCCESS;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_bench_conv_input_gradient: %s\n", e.what());
    return EXIT_FAILURE;
  }
}
