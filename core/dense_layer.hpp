// Fully connected layer on oneDNN: out = in * W^T + b, W stored [outputs, inputs].
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/config.hpp"
#include "core/gemm.hpp"
#include "core/layer.hpp"
#include "core/recent_cache.hpp"

namespace strata {

class DenseLayer final : public Layer {
 public:
  DenseLayer(std::string name, std::int64_t units, InitKind init);
  ~DenseLayer() override;
  const char* kind() const override { return "dense"; }
  Shape build(const Shape& input_shape) override;
  void initialize(Rng& rng) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<Param> params() override;
  std::int64_t inputs() const { return inputs_; }

  // The layer's units split over `workers` threads (Model's unit split): worker w computes units
  // worker_share(units, workers, w) for the whole batch and owns those rows of W, b and their
  // gradients. Only the activations pass between the threads, not the parameters. Call
  // prepare_unit_split on one thread before the workers' calls.
  void prepare_unit_split(int workers);
  // Worker's columns of out, which must be [batch, units] already.
  void forward_units(const Tensor& in, Tensor& out, int worker);
  // Worker's units [first, last).
  std::pair<std::int64_t, std::int64_t> units_of(int worker) const;
  // Worker's rows of the weight and bias gradients, from its units' columns of grad_out alone,
  // and with `input_grad` its units' part of the input gradient, which add_unit_input_grads sums.
  void backward_units(const Tensor& in, const Tensor& grad_out, int worker, bool input_grad);
  // Columns [first, last) of the input gradient (every row): the sum of every worker's part, in
  // worker order. grad_in must have the input's shape already.
  void add_unit_input_grads(Tensor& grad_in, std::int64_t first, std::int64_t last) const;

 private:
  struct Forward;                               // for one batch size (and a unit range)
  struct UnitShare;                             // one worker's state in the unit split
  RecentCache<std::int64_t, Forward> forward_;  // by batch size
  std::vector<std::unique_ptr<UnitShare>> unit_shares_;
  std::int64_t inputs_ = 0;
  std::int64_t units_;
  InitKind init_;
  Tensor weight_, bias_, weight_grad_, bias_grad_;
  GemmRowPadding gemm_padding_;  // for the gradient products
};

}  // namespace strata
