// The layer interface: explicit forward and backward over a batch, and the parameters it owns.
#pragma once

#include <string>
#include <vector>

#include "core/rng.hpp"
#include "core/tensor.hpp"

namespace strata {

// One trainable tensor and the gradient the last backward pass wrote for it.
struct Param {
  std::string name;  // "<layer>/weight" or "<layer>/bias"
  Tensor* value;
  Tensor* grad;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual const char* kind() const = 0;

  // Fixes the per-sample input shape (no batch axis) and returns the per-sample output shape.
  virtual Shape build(const Shape& input_shape) = 0;
  // Draws initial parameters; layers without parameters ignore it.
  virtual void initialize(Rng& /*rng*/) {}
  // Restarts the layer's own random stream (dropout masks); layers without noise ignore it.
  virtual void reseed_noise(std::uint64_t /*seed*/) {}

  // in: [batch, ...input_shape]; out is resized by the layer.
  virtual void forward(const Tensor& in, Tensor& out, bool training) = 0;
  // Writes (not accumulates) the parameter gradients for this batch, and the input gradient
  // when grad_in is not null; the first layer passes null because nothing needs it.
  virtual void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                        Tensor* grad_in) = 0;

  virtual std::vector<Param> params() { return {}; }

 private:
  std::string name_;
};

}  // namespace strata
