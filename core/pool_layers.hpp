// 2-D max and average pooling over NCHW activations (no padding).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/conv_geometry.hpp"
#include "core/layer.hpp"

namespace strata {

class Pool2DLayer final : public Layer {
 public:
  enum class Mode { max, average };
  Pool2DLayer(std::string name, Mode mode, int size, int stride);
  const char* kind() const override { return mode_ == Mode::max ? "maxpool2d" : "avgpool2d"; }
  Shape build(const Shape& input_shape) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  // Pools `in`, samples [first_sample, first_sample + in.dim(0)) of a batch of `batch`, into those
  // samples of `out`: the model's way of running a conv and this pooling a few samples at a time.
  // The slice at first_sample 0 sizes out (and the first maxima) for the whole batch; the others
  // must follow in the same layout. forward() is the one slice of the whole batch.
  void forward_slice(const Tensor& in, Tensor& out, std::int64_t first_sample, std::int64_t batch,
                     bool training);
  // Where a kernel that computes this pooling's output itself (the conv before it, fused with it)
  // writes a batch of it: sizes out in `layout`, and the first maxima, as forward_slice does at
  // sample 0. first_maxima is null unless this pass records them.
  struct Output {
    float* values;
    std::uint8_t* first_maxima;
  };
  Output begin_output(Tensor& out, std::int64_t batch, Layout layout, bool training);
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;

  // Max pooling whose input is a ReLU's output (a conv with a fused ReLU): backward then applies
  // the ReLU's derivative too, giving a window's gradient to its maximum only when that maximum
  // is positive, so that the conv need not mask its whole output gradient in a pass of its own.
  void apply_relu_derivative() { relu_input_ = true; }
  // A max pooling's windows (for a conv that takes its weight gradient from them); none for an
  // average pooling, whose gradient reaches every input, or for windows of more than 254 inputs
  // (their first maxima's indices would not fit a byte).
  std::optional<MaxPoolWindows> max_windows() const;

  // For a conv that takes its weight gradient from this max pooling: a training forward pass then
  // also records, for each output element, which input of its window gets the gradient: the first
  // (row-major, kh * size + kw) that equals the maximum, or no_first_max where none does (a NaN),
  // or the window passes no gradient (a ReLU's maximum that is not positive). The conv's backward
  // then reads one byte per output element, not its own output again.
  void record_first_maxima(bool record) { record_first_maxima_ = record; }
  static constexpr std::uint8_t no_first_max = 255;
  // In the layout of the last forward pass's output; empty unless that pass trained and recorded.
  const std::vector<std::uint8_t>& first_maxima() const { return first_maxima_; }

 private:
  Mode mode_;
  bool relu_input_ = false;
  bool record_first_maxima_ = false;
  std::vector<std::uint8_t> first_maxima_;
  int size_, stride_;
  std::int64_t channels_ = 0, in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
};

}  // namespace strata
