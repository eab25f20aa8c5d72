// Optimizers: SGD (momentum, Nesterov, weight decay) and Adam, with state that saves exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.hpp"
#include "core/layer.hpp"

namespace strata {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter from the gradient in it, at learning rate `lr`.
  virtual void step(const std::vector<Param>& params, double lr) = 0;
  // The optimizer's moving state, one tensor per (buffer, parameter), for checkpoints.
  virtual std::vector<Tensor*> state() = 0;
  std::int64_t steps_taken() const { return steps_; }

 protected:
  std::int64_t steps_ = 0;
};

// PyTorch's SGD semantics: the first step seeds the momentum buffer with the gradient.
class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(const OptimizerSpec& spec) : spec_(spec) {}
  void step(const std::vector<Param>& params, double lr) override;
  std::vector<Tensor*> state() override;

 private:
  OptimizerSpec spec_;
  std::vector<Tensor> velocity_;
};

// Adam with L2 weight decay added to the gradient (PyTorch's Adam, not AdamW).
class AdamOptimizer final : public Optimizer {
 public:
  explicit AdamOptimizer(const OptimizerSpec& spec) : spec_(spec) {}
  void step(const std::vector<Param>& params, double lr) override;
  std::vector<Tensor*> state() override;

 private:
  OptimizerSpec spec_;
  std::vector<Tensor> first_moment_, second_moment_;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec);

}  // namespace strata
