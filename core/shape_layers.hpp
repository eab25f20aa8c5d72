// Layers that reshape or mask activations without parameters: Flatten and Dropout.
#pragma once

#include <cstdint>

#include "core/layer.hpp"

namespace strata {

class FlattenLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* kind() const override { return "flatten"; }
  Shape build(const Shape& input_shape) override { return {element_count(input_shape)}; }
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

 private:
  Tensor plain_grad_;
};

// Inverted dropout: scales kept units by 1/(1-rate) in training, so inference is the identity.
// The mask comes from the layer's own counter-based stream, seeded when the model is built.
class DropoutLayer final : public Layer {
 public:
  DropoutLayer(std::string name, float rate) : Layer(std::move(name)), rate_(rate) {}
  const char* kind() const override { return "dropout"; }
  Shape build(const Shape& input_shape) override { return input_shape; }
  void reseed_noise(std::uint64_t seed) override { rng_ = Rng(seed); }
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

  Rng& rng() { return rng_; }

 private:
  float rate_;
  Rng rng_;
  Tensor mask_;  // 0 or 1/(1-rate) per element of the last training batch
  bool last_was_training_ = false;
};

}  // namespace strata
