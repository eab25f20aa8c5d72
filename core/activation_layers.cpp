#include "core/activation_layers.hpp"

#include <cmath>
#include <stdexcept>

namespace strata {

ActivationLayer::ActivationLayer(std::string name, LayerKind kind, float alpha)
    : Layer(std::move(name)), kind_(kind), alpha_(alpha) {
  if (kind != LayerKind::relu && kind != LayerKind::leaky_relu && kind != LayerKind::tanh &&
      kind != LayerKind::sigmoid)
    throw std::invalid_argument("ActivationLayer: not an activation kind");
}

void ActivationLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  out.resize(in.shape(), in.layout());
  forward_values(in.data(), out.data(), in.size());
}

void ActivationLayer::forward_columns(const Tensor& in, Tensor& out, std::int64_t first,
                                      std::int64_t last) const {
  const std::int64_t columns = in.dim(1);
  for (std::int64_t r = 0; r < in.dim(0); ++r)
    forward_values(in.data() + r * columns + first, out.data() + r * columns + first, last - first);
}

void ActivationLayer::forward_values(const float* x, float* y, std::int64_t n) const {
  switch (kind_) {
    case LayerKind::relu:
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case LayerKind::leaky_relu:
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : alpha_ * x[i];
      break;
    case LayerKind::tanh:
      for (std::int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      break;
    default:  // sigmoid
      for (std::int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
      break;
  }
}

// Each derivative is written in terms of what is cheapest to read: the input for the
// piecewise-linear ones, the output for tanh and sigmoid.
void ActivationLayer::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                               Tensor* grad_in) {
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape(), in.layout());
  backward_values(in.data(), out.data(), grad_out.data(), grad_in->data(), in.size());
}

void ActivationLayer::backward_columns(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                                       Tensor& grad_in, std::int64_t first,
                                       std::int64_t last) const {
  const std::int64_t columns = in.dim(1);
  for (std::int64_t r = 0; r < in.dim(0); ++r) {
    const std::int64_t at = r * columns + first;
    backward_values(in.data() + at, out.data() + at, grad_out.data() + at, grad_in.data() + at,
                    last - first);
  }
}

void ActivationLayer::backward_values(const float* x, const float* y, const float* dy, float* dx,
                                      std::int64_t n) const {
  switch (kind_) {
    case LayerKind::relu:
      for (std::int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
      break;
    case LayerKind::leaky_relu:
      for (std::int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : alpha_ * dy[i];
      break;
    case LayerKind::tanh:
      for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      break;
    default:  // sigmoid
      for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
      break;
  }
}

}  // namespace strata
