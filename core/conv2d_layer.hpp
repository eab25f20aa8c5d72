// 2-D convolution on oneDNN primitives, optionally with a fused ReLU; weights [filters, channels,
// k, k].
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "core/config.hpp"
#include "core/conv_geometry.hpp"
#include "core/layer.hpp"
#include "core/recent_cache.hpp"

namespace strata {

class ConvReluMaxPool;
class PooledConvWeightGradient;

// Accepts plain or channel-blocked input. Its output is channel-blocked when oneDNN's fastest
// kernel writes that layout (blocks of 16 channels on AVX-512, 8 on AVX2; filters a multiple of
// the block), so that the next pooling and conv layers read it without a reorder; activations
// leave the layer plain only when they must. The weight gradient is a forward convolution
// (core/conv_weight_grad.hpp) wherever oneDNN has a fast kernel for that, except for a plain input
// that oneDNN's backward-weights kernel reads as it is (AVX-512's, on one channel), and the input
// gradient an sgemm and a scatter-add (core/conv_input_grad.hpp) where oneDNN's backward-data
// kernel is its AVX2 one and the input channel-blocked.
class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(std::string name, int filters, int kernel, int stride, int padding, InitKind init);
  ~Conv2DLayer() override;
  const char* kind() const override { return fused_relu_ ? "conv2d+relu" : "conv2d"; }
  Shape build(const Shape& input_shape) override;
  void initialize(Rng& rng) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<Param> params() override;
  // The model's choice for a conv whose input gradient nothing needs and whose output a max
  // pooling with these windows reads (nullopt: any other conv): its weight and bias gradients
  // then come from the pooling's (core/pooled_conv_weight_grad.hpp), by backward_from_max_pool in
  // place of the pooling's backward pass and this layer's.
  void take_weight_gradient_from(const std::optional<MaxPoolWindows>& pooling);
  // first_maxima: the pooling's (Pool2DLayer::first_maxima), in pooled_grad's layout.
  void backward_from_max_pool(const Tensor& in, std::span<const std::uint8_t> first_maxima,
                              const Tensor& pooled_grad);
  // The max pooling after this conv, where the model runs the two forward together (nothing else
  // reads the conv's output), else nullopt.
  void set_max_pooling_after(const std::optional<MaxPoolWindows>& pooling);
  // For such a conv, with its ReLU fused: the layout in which forward_max_pooled writes the
  // pooling's output for this input (oneDNN's output layout for the conv, so the layers after it
  // see what they would have), or nullopt where the fused kernel (core/conv_relu_max_pool.hpp)
  // does not run this conv.
  std::optional<Layout> max_pooled_layout(std::int64_t batch, Layout input_layout);
  // The forward pass, the ReLU and the max pooling as one kernel, where max_pooled_layout has a
  // layout: writes the pooling's output there (and its first maxima, where not null), never the
  // conv's own output.
  void forward_max_pooled(const Tensor& in, float* pooled, std::uint8_t* first_maxima);

  // Applies ReLU to the output inside the convolution kernel (the model does this for conv → relu),
  // saving one pass over the activations forward and one backward.
  void fuse_relu() { fused_relu_ = true; }
  bool relu_fused() const { return fused_relu_; }
  // The next layer's backward applies the fused ReLU's derivative (a max pooling that knows its
  // input passed a ReLU), so this layer's backward reads grad_out as it is.
  void leave_relu_derivative_to_next() { relu_derivative_applied_ = true; }
  // Which oneDNN implementation runs the forward pass, e.g. "jit:avx512_core", then ", weight
  // gradient as a forward convolution" and ", input gradient by GEMM" where those paths run (see
  // the class comment), for the batch size and input layout the layer saw last; ", weight gradient
  // from the max pooling" where the model chose that path; "strata's fused conv, ReLU and max
  // pooling forward" in place of oneDNN's kernel where forward_max_pooled ran.
  std::string implementation() const;

 private:
  struct Primitives;  // oneDNN state for one batch size and input layout
  Primitives& primitives_for(std::int64_t batch, Layout input_layout);
  std::unique_ptr<Primitives> make_primitives(std::int64_t batch, Layout input_layout) const;
  ConvGeometry geometry(std::int64_t batch) const;
  void weight_gradient(Primitives& p, const Tensor& in, const float* diff, Layout grad_layout);

  int filters_, kernel_, stride_, padding_;
  InitKind init_;
  bool fused_relu_ = false;
  bool relu_derivative_applied_ = false;
  std::int64_t channels_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  Tensor weight_, bias_, weight_grad_, bias_grad_;
  Tensor masked_grad_;  // grad_out with the fused ReLU's derivative applied
  RecentCache<std::pair<std::int64_t, Layout>, Primitives> primitives_;
  std::optional<MaxPoolWindows> pooling_;                         // take_weight_gradient_from's
  std::optional<MaxPoolWindows> pooling_after_;                   // set_max_pooling_after's
  std::unique_ptr<PooledConvWeightGradient> pooled_weight_grad_;  // built at first use
  std::unique_ptr<ConvReluMaxPool> max_pooled_forward_;           // built at first use
};

}  // namespace strata
