// Every layer's backward pass against central finite differences, and forward values by hand.
#include <catch2/catch.hpp>

#include "core/activation_layers.hpp"
#include "core/conv2d_layer.hpp"
#include "core/dense_layer.hpp"
#include "core/pool_layers.hpp"
#include "core/shape_layers.hpp"
#include "tests/core/gradient_check.hpp"

using namespace strata;
using strata::testing::check_gradients;

TEST_CASE("dense gradients match finite differences", "[layers][gradcheck]") {
  DenseLayer layer("fc", 7, InitKind::glorot);
  CHECK(check_gradients(layer, {5, 11}, 1) > 60);
}

TEST_CASE("dense forward computes x W^T + b", "[layers]") {
  DenseLayer layer("fc", 2, InitKind::zeros);
  layer.build({3});
  auto p = layer.params();
  // W = [[1,2,3],[4,5,6]], b = [0.5, -1]
  for (int i = 0; i < 6; ++i) (*p[0].value)[i] = static_cast<float>(i + 1);
  (*p[1].value)[0] = 0.5f;
  (*p[1].value)[1] = -1.0f;
  Tensor x({1, 3}, {1.0f, 0.0f, -1.0f}), y;
  layer.forward(x, y, false);
  CHECK(y[0] == Approx(1 - 3 + 0.5));
  CHECK(y[1] == Approx(4 - 6 - 1));
}

TEST_CASE("conv2d gradients match finite differences", "[layers][gradcheck]") {
  SECTION("no padding, stride 1") {
    Conv2DLayer layer("conv", 4, 3, 1, 0, InitKind::he);
    CHECK(check_gradients(layer, {2, 3, 7, 7}, 2) > 60);
  }
  SECTION("padding 1, stride 2, one input channel") {
    Conv2DLayer layer("conv", 5, 3, 2, 1, InitKind::glorot);
    CHECK(check_gradients(layer, {3, 1, 8, 8}, 3) > 60);
  }
  SECTION("the benchmark CNN's second conv shape, 5x5 with 16 channels") {
    Conv2DLayer layer("conv", 16, 5, 1, 0, InitKind::he);
    CHECK(check_gradients(layer, {2, 16, 12, 12}, 4, 40) > 60);
  }
}

TEST_CASE("conv2d forward matches a direct convolution", "[layers]") {
  Conv2DLayer layer("conv", 2, 3, 1, 1, InitKind::he);
  Rng rng(9);
  layer.build({2, 5, 5});
  layer.initialize(rng);
  auto p = layer.params();
  strata::testing::fill_normal(*p[1].value, rng);
  Tensor x({1, 2, 5, 5}), y;
  strata::testing::fill_normal(x, rng);
  layer.forward(x, y, false);
  REQUIRE(y.shape() == Shape{1, 2, 5, 5});
  const Tensor& w = *p[0].value;
  for (int f = 0; f < 2; ++f)
    for (int oh = 0; oh < 5; ++oh)
      for (int ow = 0; ow < 5; ++ow) {
        double sum = (*p[1].value)[f];
        for (int c = 0; c < 2; ++c)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              const int ih = oh + kh - 1, iw = ow + kw - 1;
              if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
              sum += static_cast<double>(w[((f * 2 + c) * 3 + kh) * 3 + kw]) *
                     x[(c * 5 + ih) * 5 + iw];
            }
        CHECK(y[(f * 5 + oh) * 5 + ow] == Approx(sum).epsilon(1e-4));
      }
}

TEST_CASE("pooling gradients match finite differences", "[layers][gradcheck]") {
  SECTION("max 2x2") {
    Pool2DLayer layer("pool", Pool2DLayer::Mode::max, 2, 2);
    CHECK(check_gradients(layer, {2, 3, 6, 6}, 5, 100, 1e-3f) > 60);
  }
  SECTION("average 3x3 stride 1") {
    Pool2DLayer layer("pool", Pool2DLayer::Mode::average, 3, 1);
    CHECK(check_gradients(layer, {2, 2, 5, 5}, 6) > 60);
  }
}

TEST_CASE("max pooling picks the window maximum", "[layers]") {
  Pool2DLayer layer("pool", Pool2DLayer::Mode::max, 2, 2);
  layer.build({1, 2, 4});
  Tensor x({1, 1, 2, 4}, {1, 5, -2, -3, 4, 0, -1, -7}), y;
  layer.forward(x, y, false);
  REQUIRE(y.shape() == Shape{1, 1, 1, 2});
  CHECK(y[0] == 5.0f);
  CHECK(y[1] == -1.0f);
}

TEST_CASE("activation gradients match finite differences", "[layers][gradcheck]") {
  for (auto kind : {LayerKind::relu, LayerKind::leaky_relu, LayerKind::tanh, LayerKind::sigmoid}) {
    INFO(to_string(kind));
    ActivationLayer layer("act", kind, 0.1f);
    // eps below the smallest |x| a kink could hide behind is not needed: x ~ N(0,1) rarely falls
    // within 1e-3.
    CHECK(check_gradients(layer, {4, 9}, 7, 36, 1e-3f) > 30);
  }
}

TEST_CASE("flatten and dropout gradients match finite differences", "[layers][gradcheck]") {
  FlattenLayer flatten("flat");
  CHECK(check_gradients(flatten, {2, 3, 2, 2}, 8) > 20);
  DropoutLayer dropout("drop", 0.4f);
  CHECK(check_gradients(dropout, {3, 20}, 9) > 50);
}

TEST_CASE("dropout drops about `rate` and is the identity at inference", "[layers]") {
  DropoutLayer layer("drop", 0.25f);
  layer.build({1000});
  layer.reseed_noise(5);
  Tensor x({4, 1000}), y;
  x.fill(1.0f);
  layer.forward(x, y, true);
  int zeros = 0;
  for (auto v : y.values()) {
    if (v == 0.0f)
      ++zeros;
    else
      CHECK(v == Approx(1.0f / 0.75f));
  }
  CHECK(zeros > 900);
  CHECK(zeros < 1100);
  layer.forward(x, y, false);
  for (auto v : y.values()) CHECK(v == 1.0f);
}

TEST_CASE("layers take channel-blocked activations", "[layers][gradcheck][layout]") {
  const Layout blocked_layout = GENERATE(Layout::channel_blocked8, Layout::channel_blocked16);
  INFO("channels in a block: " << channel_block(blocked_layout));
  SECTION("conv2d reading a blocked input") {
    Conv2DLayer layer("conv", 16, 3, 1, 1, InitKind::he);
    CHECK(check_gradients(layer, {2, 16, 6, 6}, 11, 60, 1e-2f, blocked_layout) > 60);
  }
  SECTION("max pooling") {
    Pool2DLayer layer("pool", Pool2DLayer::Mode::max, 2, 2);
    CHECK(check_gradients(layer, {2, 32, 4, 6}, 12, 100, 1e-3f, blocked_layout) > 60);
  }
  SECTION("average pooling") {
    Pool2DLayer layer("pool", Pool2DLayer::Mode::average, 2, 1);
    CHECK(check_gradients(layer, {2, 16, 5, 5}, 13, 60, 1e-2f, blocked_layout) > 60);
  }
  SECTION("relu") {
    ActivationLayer layer("act", LayerKind::relu);
    CHECK(check_gradients(layer, {2, 16, 3, 3}, 14, 60, 1e-3f, blocked_layout) > 30);
  }
  SECTION("flatten turns blocked into plain (C,H,W) order") {
    FlattenLayer layer("flat");
    CHECK(check_gradients(layer, {2, 16, 2, 3}, 15, 60, 1e-2f, blocked_layout) > 30);
    Tensor plain({1, 16, 2, 3}), blocked, flat;
    for (std::int64_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<float>(i);
    convert_layout(plain, blocked, blocked_layout);
    CHECK(blocked[1] == 6.0f);  // channel 1 of pixel 0 sits next to channel 0 in the blocked layout
    layer.forward(blocked, flat, false);
    CHECK(flat.layout() == Layout::plain);
    for (std::int64_t i = 0; i < flat.size(); ++i) CHECK(flat[i] == static_cast<float>(i));
  }
}

TEST_CASE("a conv with 16k filters hands on blocked output that equals the plain result",
          "[layers][layout]") {
  // Blocked as oneDNN's kernel for this CPU wants it: 16 channels on AVX-512, 8 on AVX2.
  Conv2DLayer layer("conv", 32, 5, 1, 0, InitKind::he);
  Rng rng(21);
  layer.build({1, 12, 12});
  layer.initialize(rng);
  Tensor x({3, 1, 12, 12}), y;
  strata::testing::fill_normal(x, rng);
  layer.forward(x, y, false);
  CHECK(channel_block(y.layout()) > 1);
  const Tensor plain = to_plain(y);
  const Tensor& w = *layer.params()[0].value;
  // Spot-check filter 17 at sample 2, pixel (3,4) against a direct sum.
  double sum = 0.0;
  for (int kh = 0; kh < 5; ++kh)
    for (int kw = 0; kw < 5; ++kw)
      sum += static_cast<double>(w[17 * 25 + kh * 5 + kw]) * x[2 * 144 + (3 + kh) * 12 + 4 + kw];
  CHECK(plain[((2 * 32 + 17) * 8 + 3) * 8 + 4] == Approx(sum).epsilon(1e-4));
}

TEST_CASE("fused conv+relu equals conv followed by relu, forward and backward",
          "[layers][layout]") {
  Rng rng(31);
  Conv2DLayer fused("conv", 16, 3, 1, 0, InitKind::he), plain("conv", 16, 3, 1, 0, InitKind::he);
  fused.fuse_relu();
  fused.build({2, 7, 7});
  plain.build({2, 7, 7});
  Rng init_a(5), init_b(5);
  fused.initialize(init_a);
  plain.initialize(init_b);
  ActivationLayer relu("relu", LayerKind::relu);
  relu.build({16, 5, 5});
  Tensor x({2, 2, 7, 7});
  strata::testing::fill_normal(x, rng);
  Tensor y_fused, z, y_plain;
  fused.forward(x, y_fused, true);
  plain.forward(x, z, true);
  relu.forward(z, y_plain, true);
  REQUIRE(y_fused.size() == y_plain.size());
  for (std::int64_t i = 0; i < y_fused.size(); ++i)
    REQUIRE(y_fused[i] == Approx(y_plain[i]).margin(1e-6));
  Tensor g;
  g.resize(y_fused.shape(), y_fused.layout());
  strata::testing::fill_normal(g, rng);
  Tensor gx_fused, gz, gx_plain;
  fused.backward(x, y_fused, g, &gx_fused);
  relu.backward(z, y_plain, g, &gz);
  plain.backward(x, z, gz, &gx_plain);
  for (std::int64_t i = 0; i < gx_fused.size(); ++i)
    REQUIRE(gx_fused[i] == Approx(gx_plain[i]).margin(1e-5));
  const auto pf = fused.params(), pp = plain.params();
  for (std::size_t k = 0; k < pf.size(); ++k)
    for (std::int64_t i = 0; i < pf[k].grad->size(); ++i)
      REQUIRE((*pf[k].grad)[i] == Approx((*pp[k].grad)[i]).margin(1e-5));
}

TEST_CASE("max pooling that applies the ReLU's derivative equals pooling then masking",
          "[layers][pool]") {
  for (const Layout layout : {Layout::plain, Layout::channel_blocked8, Layout::channel_blocked16}) {
    // A ReLU's output: many zeros, and whole windows of zeros (the first sample's first plane).
    Rng rng(21);
    Tensor z({2, 16, 6, 5});
    strata::testing::fill_normal(z, rng);
    for (std::int64_t i = 0; i < 30; ++i) z[i] = -1.0f;
    Tensor relu_out = z;
    for (float& v : relu_out.values()) v = std::max(v, 0.0f);
    Tensor x;
    convert_layout(relu_out, x, layout);
    Pool2DLayer plain_pool("pool", Pool2DLayer::Mode::max, 2, 2),
        gated("pool", Pool2DLayer::Mode::max, 2, 2);
    gated.apply_relu_derivative();
    plain_pool.build({16, 6, 5});
    gated.build({16, 6, 5});
    Tensor y, grad_out, reference, fused;
    plain_pool.forward(x, y, true);
    grad_out = y;
    strata::testing::fill_normal(grad_out, rng);
    plain_pool.backward(x, y, grad_out, &reference);
    int masked = 0;  // gradients the ReLU's derivative removes: windows whose maximum is 0
    for (std::int64_t i = 0; i < reference.size(); ++i)
      if (!(x[i] > 0.0f)) {
        masked += reference[i] != 0.0f;
        reference[i] = 0.0f;
      }
    CHECK(masked > 0);
    gated.backward(x, y, grad_out, &fused);
    REQUIRE(fused.size() == reference.size());
    for (std::int64_t i = 0; i < fused.size(); ++i) CHECK(fused[i] == reference[i]);
  }
}

TEST_CASE("dropout draws the same mask for an element in any layout", "[layers][dropout]") {
  const Layout blocked_layout = GENERATE(Layout::channel_blocked8, Layout::channel_blocked16);
  Rng rng(31);
  Tensor plain({3, 32, 4, 5});
  strata::testing::fill_normal(plain, rng);
  Tensor blocked;
  convert_layout(plain, blocked, blocked_layout);
  DropoutLayer a("drop", 0.4f), b("drop", 0.4f);
  for (DropoutLayer* d : {&a, &b}) {
    d->build({32, 4, 5});
    d->reseed_noise(99);
    d->set_noise_position(7, 64);
  }
  Tensor from_plain, from_blocked;
  a.forward(plain, from_plain, true);
  b.forward(blocked, from_blocked, true);
  REQUIRE(from_blocked.layout() == blocked_layout);
  const Tensor back = to_plain(from_blocked);
  int dropped = 0;
  for (std::int64_t i = 0; i < plain.size(); ++i) {
    CHECK(back[i] == from_plain[i]);
    dropped += from_plain[i] == 0.0f;
  }
  CHECK(dropped > plain.size() / 4);  // about 40% dropped: the mask is not trivial
}
