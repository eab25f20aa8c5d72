// 2-D convolution on oneDNN primitives; activations NCHW, weights [filters, channels, k, k].
#pragma once

#include <memory>

#include "core/config.hpp"
#include "core/layer.hpp"

namespace strata {

class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(std::string name, int filters, int kernel, int stride, int padding, InitKind init);
  ~Conv2DLayer() override;
  const char* kind() const override { return "conv2d"; }
  Shape build(const Shape& input_shape) override;
  void initialize(Rng& rng) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor* grad_in) override;
  std::vector<Param> params() override;

  // Which oneDNN implementation runs the forward pass, e.g. "jit:avx512_core".
  std::string implementation() const;

 private:
  struct Primitives;  // oneDNN state for one batch size
  Primitives& primitives_for(std::int64_t batch);

  int filters_, kernel_, stride_, padding_;
  InitKind init_;
  std::int64_t channels_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  Tensor weight_, bias_, weight_grad_, bias_grad_;
  std::unique_ptr<Primitives> primitives_;
};

}  // namespace strata
