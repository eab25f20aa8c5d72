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

 private:
  LayerKind kind_;
  float alpha_;
};

}  // namespace strata
