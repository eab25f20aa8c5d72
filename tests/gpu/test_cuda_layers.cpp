// Each GPU kernel and product against the CPU implementation in core/, within 1e-4 relative.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/activation_layers.hpp"
#include "core/conv2d_layer.hpp"
#include "core/dense_layer.hpp"
#include "core/loss.hpp"
#include "core/optimizer.hpp"
#include "core/pool_layers.hpp"
#include "core/shape_layers.hpp"
#include "cuda/conv_cudnn.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/dense_gemm.hpp"
#include "cuda/pool_cudnn.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace {

using strata::LayerKind;
using strata::Tensor;
using strata::cuda::Activation;
using strata::test::all_close;
using strata::test::Gpu;
using strata::test::random_values;

std::vector<float> values_of(const Tensor& t) {
  return {t.data(), t.data() + t.size()};
}

}  // namespace

TEST_CASE("activations forward and backward as ActivationLayer", "[gpu]") {
  Gpu gpu;
  const std::int64_t n = 4099;
  const auto x = random_values(n, 2, 3.0f), dy = random_values(n, 3);
  const std::pair<LayerKind, Activation> kinds[] = {{LayerKind::relu, Activation::relu},
                                                    {LayerKind::leaky_relu, Activation::leaky_relu},
                                                    {LayerKind::tanh, Activation::tanh},
                                                    {LayerKind::sigmoid, Activation::sigmoid}};
  for (const auto& [layer_kind, kind] : kinds) {
    strata::ActivationLayer cpu("act", layer_kind, 0.05f);
    Tensor in({n}, x), out, grad_out({n}, dy), grad_in;
    cpu.build({n});
    cpu.forward(in, out, true);
    cpu.backward(in, out, grad_out, &grad_in);

    auto d_in = gpu.upload(x), d_dy = gpu.upload(dy);
    auto d_out = gpu.allocator.allocate(n), d_dx = gpu.allocator.allocate(n);
    strata::cuda::activation_forward(kind, 0.05f, d_in.data(), d_out.data(), n, gpu.stream.get());
    strata::cuda::activation_backward(kind, 0.05f, d_in.data(), d_out.data(), d_dy.data(),
                                      d_dx.data(), n, gpu.stream.get());
    INFO(cpu.kind());
    CHECK(all_close(gpu.download(d_out), values_of(out)));
    CHECK(all_close(gpu.download(d_dx), values_of(grad_in)));
  }
}

TEST_CASE("softmax cross-entropy as core/loss", "[gpu]") {
  Gpu gpu;
  const std::int64_t batch = 37, classes = 10;
  const auto logits = random_values(batch * classes, 4, 5.0f);
  std::vector<std::int32_t> labels(batch);
  for (std::int64_t b = 0; b < batch; ++b) labels[b] = static_cast<std::int32_t>((b * 7) % classes);
  Tensor cpu_grad;
  const double cpu_loss =
      strata::softmax_cross_entropy(Tensor({batch, classes}, logits), labels, cpu_grad, 64.0);
  auto d_logits = gpu.upload(logits);
  auto d_grad = gpu.allocator.allocate(batch * classes), d_loss = gpu.allocator.allocate(batch);
  // Labels travel as int32 bits in a float buffer: the allocator hands out floats.
  std::vector<float> label_bits(batch);
  std::memcpy(label_bits.data(), labels.data(), labels.size() * sizeof(std::int32_t));
  auto d_labels = gpu.upload(label_bits);
  strata::cuda::softmax_cross_entropy(
      d_logits.data(), reinterpret_cast<const std::int32_t*>(d_labels.data()), d_loss.data(),
      d_grad.data(), batch, classes, 64.0f, gpu.stream.get());
  const auto rows = gpu.download(d_loss);
  const double gpu_loss = std::accumulate(rows.begin(), rows.end(), 0.0) / batch;
  CHECK(gpu_loss == Approx(cpu_loss).epsilon(1e-5));
  CHECK(all_close(gpu.download(d_grad), values_of(cpu_grad)));
}

TEST_CASE("dense forward and backward on cuBLAS as DenseLayer", "[gpu]") {
  Gpu gpu;
  const std::int64_t batch = 33, inputs = 129, outputs = 65;
  strata::DenseLayer cpu("dense", outputs, strata::InitKind::glorot);
  cpu.build({inputs});
  strata::Rng rng(5);
  cpu.initialize(rng);
  const auto params = cpu.params();  // weight, bias
  const auto x = random_values(batch * inputs, 6), dy = random_values(batch * outputs, 7);
  Tensor in({batch, inputs}, x), out, grad_out({batch, outputs}, dy), grad_in;
  cpu.forward(in, out, true);
  cpu.backward(in, out, grad_out, &grad_in);

  const strata::cuda::BlasHandle blas(gpu.stream.get());
  const strata::cuda::DenseShape shape{batch, inputs, outputs};
  auto d_in = gpu.upload(x), d_dy = gpu.upload(dy);
  auto d_weight = gpu.upload(values_of(*params[0].value));
  auto d_bias = gpu.upload(values_of(*params[1].value));
  auto d_out = gpu.allocator.allocate(batch * outputs);
  auto d_weight_grad = gpu.allocator.allocate(outputs * inputs);
  auto d_bias_grad = gpu.allocator.allocate(outputs);
  auto d_grad_in = gpu.allocator.allocate(batch * inputs);
  strata::cuda::dense_forward(blas, shape, d_in.data(), d_weight.data(), d_bias.data(),
                              d_out.data(), gpu.stream.get());
  strata::cuda::dense_backward(blas, shape, d_in.data(), d_weight.data(), d_dy.data(),
                               d_weight_grad.data(), d_bias_grad.data(), d_grad_in.data(),
                               gpu.stream.get());
  CHECK(all_close(gpu.download(d_out), values_of(out)));
  CHECK(all_close(gpu.download(d_weight_grad), values_of(*params[0].grad)));
  CHECK(all_close(gpu.download(d_bias_grad), values_of(*params[1].grad)));
  CHECK(all_close(gpu.download(d_grad_in), values_of(grad_in)));
}

TEST_CASE("SGD and Adam steps as core/optimizer, over three steps", "[gpu]") {
  Gpu gpu;
  const std::int64_t n = 5003;
  for (const bool adam : {false, true}) {
    for (const bool nesterov : {false, true}) {
      if (adam && nesterov) continue;
      strata::OptimizerSpec spec;
      spec.kind = adam ? strata::OptimizerKind::adam : strata::OptimizerKind::sgd;
      spec.momentum = 0.9;
      spec.nesterov = nesterov;
      spec.weight_decay = 1e-3;
      auto cpu = strata::make_optimizer(spec);
      Tensor w({n}, random_values(n, 8)), g({n});
      const std::vector<strata::Param> params{{"p/weight", &w, &g}};
      auto d_w = gpu.upload(values_of(w)), d_g = gpu.allocator.allocate(n);
      auto d_m = gpu.upload(std::vector<float>(n, 0.0f)),
           d_v = gpu.upload(std::vector<float>(n, 0.0f));
      for (int step = 1; step <= 3; ++step) {
        const auto grads = random_values(n, 10 + step);
        std::copy(grads.begin(), grads.end(), g.data());
        strata::cuda::copy_to_device(grads, d_g, gpu.stream);
        const double lr = 0.05;
        cpu->step(params, lr);
        if (adam) {
          strata::cuda::AdamStep s;
          s.step_size = static_cast<float>(lr / (1.0 - std::pow(spec.beta1, step)));
          s.inv_bias2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(spec.beta2, step)));
          s.beta1 = static_cast<float>(spec.beta1);
          s.beta2 = static_cast<float>(spec.beta2);
          s.eps = static_cast<float>(spec.eps);
          s.weight_decay = static_cast<float>(spec.weight_decay);
          strata::cuda::adam_update(d_w.data(), d_g.data(), d_m.data(), d_v.data(), n, s,
                                    gpu.stream.get());
        } else {
          strata::cuda::SgdStep s{static_cast<float>(lr), 0.9f, 1e-3f, nesterov, step == 1};
          strata::cuda::sgd_update(d_w.data(), d_g.data(), d_m.data(), n, s, gpu.stream.get());
        }
      }
      INFO((adam ? "adam" : nesterov ? "sgd nesterov" : "sgd"));
      CHECK(all_close(gpu.download(d_w), values_of(w)));
    }
  }
}

TEST_CASE("gradient accumulation adds micro-batches", "[gpu]") {
  Gpu gpu;
  const auto a = random_values(1001, 20), b = random_values(1001, 21);
  auto d_a = gpu.upload(a), d_b = gpu.upload(b);
  strata::cuda::accumulate(d_a.data(), d_b.data(), 1001, gpu.stream.get());
  const auto sum = gpu.download(d_b);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(sum[i] == a[i] + b[i]);
}

TEST_CASE("convolution forward and backward on cuDNN as Conv2DLayer", "[gpu]") {
  Gpu gpu;
  const strata::cuda::CudnnHandle cudnn(gpu.stream.get());
  struct Case {
    int filters, kernel, stride, padding;
  };
  for (const Case c : {Case{6, 3, 1, 1}, Case{5, 5, 2, 0}}) {
    const strata::cuda::ConvShape shape{9, 3, 13, 11, c.filters, c.kernel, c.stride, c.padding};
    strata::Conv2DLayer cpu("conv", c.filters, c.kernel, c.stride, c.padding, strata::InitKind::he);
    const strata::Shape out_shape = cpu.build({shape.channels, shape.height, shape.width});
    REQUIRE(out_shape == strata::Shape{c.filters, shape.out_height(), shape.out_width()});
    strata::Rng rng(30);
    cpu.initialize(rng);
    const auto params = cpu.params();  // weight, bias
    const std::int64_t in_size = shape.batch * shape.channels * shape.height * shape.width;
    const std::int64_t out_size = shape.batch * c.filters * shape.out_height() * shape.out_width();
    const auto x = random_values(in_size, 31), dy = random_values(out_size, 32);
    Tensor in({shape.batch, shape.channels, shape.height, shape.width}, x), out;
    Tensor grad_out({shape.batch, c.filters, shape.out_height(), shape.out_width()}, dy), grad_in;
    cpu.forward(in, out, true);
    cpu.backward(in, out, grad_out, &grad_in);

    const strata::cuda::Convolution conv(cudnn, shape, gpu.allocator);
    auto d_in = gpu.upload(x), d_dy = gpu.upload(dy);
    auto d_weight = gpu.upload(values_of(*params[0].value));
    auto d_bias = gpu.upload(values_of(*params[1].value));
    auto d_out = gpu.allocator.allocate(out_size), d_grad_in = gpu.allocator.allocate(in_size);
    auto d_weight_grad = gpu.allocator.allocate(params[0].value->size());
    auto d_bias_grad = gpu.allocator.allocate(c.filters);
    conv.forward(d_in.data(), d_weight.data(), d_bias.data(), d_out.data());
    conv.backward(d_in.data(), d_weight.data(), d_dy.data(), d_weight_grad.data(),
                  d_bias_grad.data(), d_grad_in.data());
    INFO("filters " << c.filters << ", kernel " << c.kernel << ", stride " << c.stride
                    << "; cuDNN algorithms " << conv.algorithms());
    CHECK(all_close(gpu.download(d_out), values_of(strata::to_plain(out))));
    CHECK(all_close(gpu.download(d_weight_grad), values_of(*params[0].grad)));
    CHECK(all_close(gpu.download(d_bias_grad), values_of(*params[1].grad)));
    CHECK(all_close(gpu.download(d_grad_in), values_of(strata::to_plain(grad_in))));
  }
}

TEST_CASE("dropout draws DropoutLayer's mask bit for bit", "[gpu]") {
  Gpu gpu;
  const std::int64_t rows = 17, per_row = 301;
  const auto x = random_values(rows * per_row, 40), dy = random_values(rows * per_row, 41);
  strata::DropoutLayer cpu("dropout", 0.3f);
  cpu.build({per_row});
  cpu.reseed_noise(0x5eed);
  cpu.set_noise_position(12, 640);
  Tensor in({rows, per_row}, x), out, grad_out({rows, per_row}, dy), grad_in;
  cpu.forward(in, out, true);
  cpu.backward(in, out, grad_out, &grad_in);

  auto d_in = gpu.upload(x), d_dy = gpu.upload(dy);
  auto d_out = gpu.allocator.allocate(x.size()), d_mask = gpu.allocator.allocate(x.size());
  auto d_dx = gpu.allocator.allocate(x.size());
  strata::cuda::dropout_forward(d_in.data(), d_out.data(), d_mask.data(), rows, per_row,
                                {0x5eed, 12, 640, 0.3f}, gpu.stream.get());
  strata::cuda::dropout_backward(d_dy.data(), d_mask.data(), d_dx.data(), rows * per_row,
                                 gpu.stream.get());
  CHECK(gpu.download(d_out) == values_of(out));
  CHECK(gpu.download(d_dx) == values_of(grad_in));
}

TEST_CASE("max and average pooling on cuDNN as Pool2DLayer", "[gpu]") {
  Gpu gpu;
  const strata::cuda::CudnnHandle cudnn(gpu.stream.get());
  for (const bool max : {true, false}) {
    // 13 x 11 does not tile by 2: the last row and column take no part, as on the CPU.
    const strata::cuda::PoolShape shape{5, 3, 13, 11, 2, 2, max};
    strata::Pool2DLayer cpu(
        "pool", max ? strata::Pool2DLayer::Mode::max : strata::Pool2DLayer::Mode::average, 2, 2);
    REQUIRE(cpu.build({3, 13, 11}) == strata::Shape{3, shape.out_height(), shape.out_width()});
    const std::int64_t in_size = 5 * 3 * 13 * 11, out_size = 5 * 3 * 6 * 5;
    const auto x = random_values(in_size, 50), dy = random_values(out_size, 51);
    Tensor in({5, 3, 13, 11}, x), out, grad_out({5, 3, 6, 5}, dy), grad_in;
    cpu.forward(in, out, true);
    cpu.backward(in, out, grad_out, &grad_in);

    const strata::cuda::Pooling pool(cudnn, shape);
    auto d_in = gpu.upload(x), d_dy = gpu.upload(dy);
    auto d_out = gpu.allocator.allocate(out_size), d_dx = gpu.allocator.allocate(in_size);
    pool.forward(d_in.data(), d_out.data());
    pool.backward(d_in.data(), d_out.data(), d_dy.data(), d_dx.data());
    INFO((max ? "max" : "average"));
    CHECK(all_close(gpu.download(d_out), values_of(strata::to_plain(out))));
    CHECK(all_close(gpu.download(d_dx), values_of(strata::to_plain(grad_in))));
  }
}
