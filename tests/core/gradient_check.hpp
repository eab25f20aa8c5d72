// Central finite-difference checks of a layer's backward pass, shared by the layer tests.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/layer.hpp"

namespace strata::testing {

inline void fill_normal(Tensor& t, Rng& rng, float scale = 1.0f) {
  for (auto& v : t.values()) v = scale * rng.normal();
}

// f(x) = sum(layer(x) * r) for a fixed random r, so df/dout = r.
inline double probe(Layer& layer, const Tensor& x, const Tensor& r, std::uint64_t noise_seed) {
  Tensor y;
  layer.reseed_noise(noise_seed);
  layer.forward(x, y, true);
  double f = 0.0;
  for (std::int64_t i = 0; i < y.size(); ++i) f += static_cast<double>(y[i]) * r[i];
  return f;
}

inline void expect_close(double analytic, double numeric, const std::string& what) {
  const double tolerance = 3e-3 + 2e-2 * std::max(std::abs(analytic), std::abs(numeric));
  INFO(what << ": analytic " << analytic << " numeric " << numeric);
  CHECK(std::abs(analytic - numeric) <= tolerance);
}

// Checks d f / d input and d f / d every parameter at up to `samples` entries each.
// Returns the number of entries compared, so a test can assert that it checked something.
// `input_layout` lets a test feed channel-blocked activations, as a conv layer hands them on.
inline int check_gradients(Layer& layer, const Shape& batch_input_shape, std::uint64_t seed,
                           int samples = 60, float eps = 1e-2f,
                           Layout input_layout = Layout::plain) {
  Rng rng(seed);
  Shape sample_shape(batch_input_shape.begin() + 1, batch_input_shape.end());
  Shape out_sample = layer.build(sample_shape);
  layer.initialize(rng);
  for (auto& p : layer.params()) fill_normal(*p.value, rng, 0.5f);  // non-zero biases too

  Tensor x;
  x.resize(batch_input_shape, input_layout);
  fill_normal(x, rng);
  Shape out_shape{batch_input_shape[0]};
  out_shape.insert(out_shape.end(), out_sample.begin(), out_sample.end());
  const std::uint64_t noise = 1234;
  Tensor y, gx;
  layer.reseed_noise(noise);
  layer.forward(x, y, true);
  REQUIRE(y.shape() == out_shape);
  // r is read in the output's own layout, as the next layer's gradient would be.
  Tensor r;
  r.resize(out_shape, y.layout());
  fill_normal(r, rng);
  layer.backward(x, y, r, &gx);
  REQUIRE(gx.shape() == x.shape());
  REQUIRE(gx.layout() == x.layout());
  std::vector<Tensor> param_grads;
  for (auto& p : layer.params()) param_grads.push_back(*p.grad);

  int compared = 0;
  auto numeric = [&](float& v) {
    const float saved = v;
    v = saved + eps;
    const double up = probe(layer, x, r, noise);
    v = saved - eps;
    const double down = probe(layer, x, r, noise);
    v = saved;
    return (up - down) / (2.0 * static_cast<double>(eps));
  };
  const std::int64_t step_x = std::max<std::int64_t>(1, x.size() / samples);
  for (std::int64_t i = 0; i < x.size(); i += step_x) {
    expect_close(gx[i], numeric(x[i]), "input[" + std::to_string(i) + "]");
    ++compared;
  }
  auto params = layer.params();
  for (std::size_t k = 0; k < params.size(); ++k) {
    Tensor& value = *params[k].value;
    const std::int64_t step_p = std::max<std::int64_t>(1, value.size() / samples);
    for (std::int64_t i = 0; i < value.size(); i += step_p) {
      expect_close(param_grads[k][i], numeric(value[i]),
                   params[k].name + "[" + std::to_string(i) + "]");
      ++compared;
    }
  }
  return compared;
}

}  // namespace strata::testing
