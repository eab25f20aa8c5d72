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
  SECTION("the DESIGN CNN's second conv shape, 5x5 with 16 channels") {
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
              sum += static_cast<double>(w[((f * 2 + c) * 3 + kh) * 3 + kw]) * x[(c * 5 + ih) * 5 + iw];
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
    // eps below the smallest |x| a kink could hide behind is not needed: x ~ N(0,1) rarely falls within 1e-3.
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
    if (v == 0.0f) ++zeros;
    else CHECK(v == Approx(1.0f / 0.75f));
  }
  CHECK(zeros > 900);
  CHECK(zeros < 1100);
  layer.forward(x, y, false);
  for (auto v : y.values()) CHECK(v == 1.0f);
}
