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
};

// Inverted dropout: scales kept units by 1/(1-rate) in training, so inference is the identity.
// Sample s of optimizer step t gets its mask from the counter-based stream derive(key, {t, s}):
// the masks do not depend on how a batch is split over replicas and threads, and the layer's
// whole state is its key (the step comes from the trainer).
class DropoutLayer final : public Layer {
 public:
  DropoutLayer(std::string name, float rate) : Layer(std::move(name)), rate_(rate) {}
  const char* kind() const override { return "dropout"; }
  Shape build(const Shape& input_shape) override { return input_shape; }
  void reseed_noise(std::uint64_t seed) override { key_ = seed; }
  void set_noise_position(std::uint64_t step, std::uint64_t first_sample) override {
    step_ = step;
    first_sample_ = first_sample;
  }
  void save_state(StateDict& out, const std::string& prefix) const override;
  void load_state(const StateDict& in, const std::string& prefix) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

  std::uint64_t key() const { return key_; }

 private:
  float rate_;
  std::uint64_t key_ = 0;
  std::uint64_t step_ = 0, first_sample_ = 0;
  Tensor mask_;  // 0 or 1/(1-rate) per element of the last training batch
  bool last_was_training_ = false;
};

}  // namespace strata
