// Elementwise activations: ReLU, LeakyReLU, Tanh, Sigmoid.
#pragma once

#include "core/config.hpp"
#include "core/layer.hpp"

namespace strata {

class ActivationLayer final : public Layer {
 public:
  // kind is one of relu, leaky_relu, tanh, sigmoid; alpha is LeakyReLU's negative slope.
  ActivationLayer(std::string name, LayerKind kind, float alpha = 0.01f);
  const char* kind() const override { return to_string(kind_); }
  Shape build(const Shape& input_shape) override { return input_shape; }
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  // forward and backward on columns [first, last) of every row of [rows, columns] tensors alone,
  // which must have their shapes already: a worker's units of the dense layer before (the unit
  // split), so that their activations stay in its core's cache.
  void forward_columns(const Tensor& in, Tensor& out, std::int64_t first, std::int64_t last) const;
  void backward_columns(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                        Tensor& grad_in, std::int64_t first, std::int64_t last) const;

 private:
  void forward_values(const float* x, float* y, std::int64_t n) const;
  void backward_values(const float* x, const float* y, const float* dy, float* dx,
                       std::int64_t n) const;

  LayerKind kind_;
  float alpha_;
};

}  // namespace strata
