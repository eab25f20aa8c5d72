// The benchmark CNN's first conv (1 -> 32 channels, 5x5, ReLU) and the 2x2 max pooling after it,
// both ways a model can run their passes, on one thread and taking turns in one run: the pooling's
// plain forward pass, its backward (the conv output's whole gradient) and then the conv's weight
// gradient, against the pooling's forward pass that records each window's first maximum and the
// conv's weight gradient taken straight from those (PooledConvWeightGradient). Each pass is timed
// on its own, after a 4 MiB buffer is rewritten, so that the activations come from the shared L3
// cache, not the core's L2, as they do in a training step. Then the forward pass both ways: the
// conv (oneDNN) and the recording pooling, against the two with the ReLU as one kernel
// (ConvReluMaxPool), which writes only the pooled values and first maxima. Prints Markdown tables;
// `ONEDNN_MAX_CPU_ISA=AVX2 build/strata_bench_pooled_conv_gradient` shows AVX2's kernels.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/conv2d_layer.hpp"
#include "core/pool_layers.hpp"
#include "core/rng.hpp"
#include "tests/bench/one_thread_bench.hpp"

namespace {

struct Timings {
  double forward_plain, forward_recording, unfused, fused;
  double forward_layers, forward_one_kernel;  // the forward pass: conv then pooling / fused
  std::string kernels;
};

Timings time_both(std::int64_t batch) {
  strata::Conv2DLayer conv("conv2d_0", 32, 5, 1, 0, strata::InitKind::glorot);
  strata::Pool2DLayer pool("maxpool2d_2", strata::Pool2DLayer::Mode::max, 2, 2);
  conv.fuse_relu();
  conv.leave_relu_derivative_to_next();
  pool.apply_relu_derivative();
  const strata::Shape conv_out = conv.build({1, 28, 28});
  pool.build(conv_out);
  strata::Rng rng(3);
  conv.initialize(rng);
  strata::Tensor x({batch, 1, 28, 28}), y, pooled, pooled_grad, y_grad;
  for (std::int64_t i = 0; i < x.size(); ++i) x[i] = rng.normal();
  conv.forward(x, y, true);
  pool.forward(y, pooled, true);
  pooled_grad.resize(pooled.shape(), pooled.layout());
  for (std::int64_t i = 0; i < pooled_grad.size(); ++i) pooled_grad[i] = rng.normal();
  Timings t{};
  t.kernels = conv.implementation();
  conv.take_weight_gradient_from(pool.max_windows());
  conv.set_max_pooling_after(pool.max_windows());

  std::vector<float> cold(1 << 20);
  float touch = 1.0f;
  const auto evict = [&] {
    touch += 1.0f;
    std::fill(cold.begin(), cold.end(), touch);
  };
  const auto forward = [&](bool record) {
    pool.record_first_maxima(record);
    return strata::bench::ms_per_call([&] { pool.forward(y, pooled, true); }, 7, 10, evict);
  };
  const std::optional<strata::Layout> layout = conv.max_pooled_layout(batch, x.layout());
  if (!layout)
    throw std::runtime_error("the fused conv, ReLU and pooling kernel does not run here");
  std::vector<double> forward_plain, forward_recording, unfused, fused, forward_layers,
      forward_one_kernel;
  for (int turn = 0; turn < 3; ++turn) {
    pool.record_first_maxima(true);
    forward_layers.push_back(strata::bench::ms_per_call(
        [&] {
          conv.forward(x, y, true);
          pool.forward(y, pooled, true);
        },
        7, 10, evict));
    forward_one_kernel.push_back(strata::bench::ms_per_call(
        [&] {
          const auto out = pool.begin_output(pooled, batch, *layout, true);
          conv.forward_max_pooled(x, out.values, out.first_maxima);
        },
        7, 10, evict));
    forward_plain.push_back(forward(false));
    unfused.push_back(strata::bench::ms_per_call(
        [&] {
          pool.backward(y, pooled, pooled_grad, &y_grad);
          conv.backward(x, y, y_grad, nullptr);
        },
        7, 10, evict));
    forward_recording.push_back(forward(true));  // leaves the first maxima for the fused pass
    fused.push_back(strata::bench::ms_per_call(
        [&] { conv.backward_from_max_pool(x, pool.first_maxima(), pooled_grad); }, 7, 10, evict));
  }
  t.forward_plain = strata::median(forward_plain);
  t.forward_recording = strata::median(forward_recording);
  t.unfused = strata::median(unfused);
  t.fused = strata::median(fused);
  t.forward_layers = strata::median(forward_layers);
  t.forward_one_kernel = strata::median(forward_one_kernel);
  return t;
}

}  // namespace

int run() {
  const std::string isa = strata::bench::start_one_thread_bench();
  fmt::print(
      "The benchmark CNN's first conv (1 -> 32 channels, 5x5, ReLU, 28x28 input) and its 2x2 max "
      "pooling, on one thread, oneDNN on {}, activations from L3, each pass timed alone: the "
      "pooling's plain forward pass, its backward and the conv's (unfused), against its forward "
      "pass recording the first maxima and the conv's weight gradient from those (fused); median "
      "of 3 turns of 7 x 10 calls each.\n\n",
      isa);
  fmt::print(
      "| samples | pooling forward, plain / recording, ms | backward, pooling then conv / from "
      "the pooling, ms | both passes, unfused / fused, ms | ratio | conv's kernels |\n"
      "| --- | --- | --- | --- | --- | --- |\n");
  std::vector<std::pair<std::int64_t, Timings>> runs;
  for (const std::int64_t batch : {32, 128}) {
    const Timings t = time_both(batch);
    runs.emplace_back(batch, t);
    const double unfused = t.forward_plain + t.unfused, fused = t.forward_recording + t.fused;
    fmt::print("| {} | {:.3f} / {:.3f} | {:.3f} / {:.3f} | {:.3f} / {:.3f} | {:.2f} | {} |\n",
               batch, t.forward_plain, t.forward_recording, t.unfused, t.fused, unfused, fused,
               unfused / fused, t.kernels);
  }
  fmt::print(
      "\nThe forward pass in training, the conv on oneDNN then the pooling recording its first "
      "maxima, against the conv, ReLU and pooling as one kernel (ConvReluMaxPool), whole batches "
      "(a model runs the first way in L2-sized slices where it must):\n\n"
      "| samples | forward, conv then pooling / one kernel, ms | ratio |\n| --- | --- | --- |\n");
  for (const auto& [batch, t] : runs)
    fmt::print("| {} | {:.3f} / {:.3f} | {:.2f} |\n", batch, t.forward_layers, t.forward_one_kernel,
               t.forward_layers / t.forward_one_kernel);
  return EXIT_SUCCESS;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_bench_pooled_conv_gradient: %s\n", e.what());
    return EXIT_FAILURE;
  }
}
