// The layer interface: explicit forward and backward over a batch, and the parameters it owns.
#pragma once

#include <string>
#include <vector>

#include "core/rng.hpp"
#include "core/state.hpp"
#include "core/tensor.hpp"

namespace strata {

// One parameter tensor and the gradient the last backward pass wrote for it.
struct Param {
  std::string name;  // "<layer>/weight" or "<layer>/bias"
  Tensor* value;
  Tensor* grad;
  // A model-parallel shard holds a slice of the whole parameter; empty `shard.whole`: it is whole.
  ShardSpec shard = {};
  // False for a frozen parameter: it keeps its value, and the optimizer skips it.
  bool trainable = true;
  // Its learning rate as a multiple of the schedule's (training.lr_groups).
  double lr_scale = 1.0;
};

// Where `p`'s local values lie in the whole parameter.
inline ShardSpec shard_of(const Param& p) {
  return p.shard.whole.empty() ? ShardSpec::whole_tensor(p.value->shape()) : p.shard;
}

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
  // Which samples the next training forward pass sees: optimizer step `step`, and the position
  // of the batch's first row in that step's global batch. Noise is drawn per (step, sample), so
  // the same sample gets the same mask however the batch is split over ranks and threads.
  virtual void set_noise_position(std::uint64_t /*step*/, std::uint64_t /*first_sample*/) {}
  // State other than parameters (a noise stream's key), under `prefix`.
  virtual void save_state(StateDict& /*out*/, const std::string& /*prefix*/) const {}
  virtual void load_state(const StateDict& /*in*/, const std::string& /*prefix*/) {}

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
