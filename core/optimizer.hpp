// Optimizers: SGD (momentum, Nesterov, weight decay) and Adam, with state that saves exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
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

  // One whole step on the calling thread.
  void step(const std::vector<Param>& params, double lr);
  std::int64_t steps_taken() const { return steps_; }

  // The moving buffers (SGD: the momentum; Adam: the first and second moments), each indexed like
  // `params` and sized for them, and the step count: what an optimizer that steps elsewhere (on a
  // GPU) copies in and out, so that the state saved here stays the whole state.
  std::vector<std::vector<Tensor>*> moments(const std::vector<Param>& params);
  void set_steps_taken(std::int64_t steps) { steps_ = steps; }

  // The step count and every moving buffer, "<prefix>/<buffer>/<parameter name>", each a slice of
  // the whole tensor as its parameter is. Before the first step the buffers are saved as zeros.
  // load_state throws DataError when the checkpoint holds another optimizer's state.
  void save_state(StateDict& out, const std::string& prefix, const std::vector<Param>& params);
  // The key save_state gives each moving buffer, with the buffer: moments() order, each list
  // indexed like `params`.
  std::vector<std::pair<std::string, const Tensor*>> buffer_keys(const std::string& prefix,
                                                                 const std::vector<Param>& params);
  void load_state(const StateDict& in, const std::string& prefix, const std::vector<Param>& params);

 protected:
  // The optimizer's kind for checkpoints, and its buffer lists by name.
  virtual const char* kind() const = 0;
  virtual std::vector<std::pair<const char*, std::vector<Tensor>*>> buffers() = 0;

  std::int64_t steps_ = 0;
};

// PyTorch's SGD semantics: the first step seeds the momentum buffer with the gradient.
class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(const OptimizerSpec& spec) : spec_(spec) {}
  void begin_step(const std::vector<Param>& params) override;
  void update(const Param& param, std::size_t k, std::int64_t begin, std::int64_t end,
              double lr) override;

 private:
  const char* kind() const override { return "sgd"; }
  std::vector<std::pair<const char*, std::vector<Tensor>*>> buffers() override {
    return {{"momentum", &velocity_}};
  }

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

 private:
  const char* kind() const override { return "adam"; }
  std::vector<std::pair<const char*, std::vector<Tensor>*>> buffers() override {
    return {{"first_moment", &first_moment_}, {"second_moment", &second_moment_}};
  }

  OptimizerSpec spec_;
  std::vector<Tensor> first_moment_, second_moment_;
  double bias1_ = 1.0, bias2_sqrt_ = 1.0;  // 1 - beta1^t and sqrt(1 - beta2^t) of the current step
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec);

}  // namespace strata
