// Fully connected layer on oneDNN: out = in * W^T + b, W stored [outputs, inputs].
#pragma once

#include <memory>

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

 private:
  struct Forward;                               // for one batch size
  RecentCache<std::int64_t, Forward> forward_;  // by batch size
  std::int64_t inputs_ = 0;
  std::int64_t units_;
  InitKind init_;
  Tensor weight_, bias_, weight_grad_, bias_grad_;
  GemmRowPadding gemm_padding_;  // for the gradient products
};

}  // namespace strata
