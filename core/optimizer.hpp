// Optimizers: SGD (momentum, Nesterov, weight decay) and Adam, with state that saves exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.hpp"
#include "core/layer.hpp"

namespace strata {

// A step is begin_step() once, then update() over disjoint element ranges of every parameter.
// The ranges may run on different threads, so the gradient sum, the update and the copy to
// other replicas happen in one pass over memory per thread.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Counts the step and sizes the state for `params` on the first call.
  virtual void begin_step(const std::vector<Param>& params) = 0;
  // Updates elements [begin, end) of parameter `k` (index into the begin_step list) at rate `lr`.
  virtual void update(const Param& param, std::size_t k, std::int64_t begin, std::int64_t end,
                      double lr) = 0;
  // The optimizer's moving state, one tensor per (buffer, parameter), for checkpoints.
  virtual std::vector<Tensor*> state() = 0;

  // One whole step on the calling thread.
  void step(const std::vector<Param>& params, double lr);
  std::int64_t steps_taken() const { return steps_; }

 protected:
  std::int64_t steps_ = 0;
};

// PyTorch's SGD semantics: the first step seeds the momentum buffer with the gradient.
class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(const OptimizerSpec& spec) : spec_(spec) {}
  void begin_step(const std::vector<Param>& params) override;
  void update(const Param& param, std::size_t k, std::int64_t begin, std::int64_t end,
              double lr) override;
  std::vector<Tensor*> state() override;

 private:
  OptimizerSpec spec_;
  std::vector<Tensor> velocity_;
  bool first_step_ = true;
};

// Adam with L2 weight decay added to the gradient (PyTorch's Adam, not AdamW).
class AdamOptimizer final : public Optimizer {
 public:
  explicit AdamOptimizer(const OptimizerSpec& spec) : spec_(spec) {}
  void begin_step(const std::vector<Param>& params) override;
  void update(const Param& param, std::size_t k, std::int64_t begin, std::int64_t end,
              double lr) override;
  std::vector<Tensor*> state() override;

 private:
  OptimizerSpec spec_;
  std::vector<Tensor> first_moment_, second_moment_;
  double bias1_ = 1.0, bias2_sqrt_ = 1.0;  // 1 - beta1^t and sqrt(1 - beta2^t) of the current step
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec);

}  // namespace strata
