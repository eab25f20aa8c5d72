#include "core/pool_layers.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

Pool2DLayer::Pool2DLayer(std::string name, Mode mode, int size, int stride)
    : Layer(std::move(name)), mode_(mode), size_(size), stride_(stride) {}

Shape Pool2DLayer::build(const Shape& input_shape) {
  if (input_shape.size() != 3)
    throw std::invalid_argument(
        fmt::format("layer {}: pooling needs a [C,H,W] input, got {}", name(), shape_string(input_shape)));
  channels_ = input_shape[0];
  in_h_ = input_shape[1];
  in_w_ = input_shape[2];
  if (in_h_ < size_ || in_w_ < size_)
    throw std::invalid_argument(fmt::format("layer {}: window {} is larger than the input {}x{}", name(), size_,
                                            in_h_, in_w_));
  out_h_ = (in_h_ - size_) / stride_ + 1;
  out_w_ = (in_w_ - size_) / stride_ + 1;
  return {channels_, out_h_, out_w_};
}

void Pool2DLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  const std::int64_t planes = in.dim(0) * channels_;
  out.resize({in.dim(0), channels_, out_h_, out_w_});
  if (mode_ == Mode::max) argmax_.resize(static_cast<std::size_t>(out.size()));
  const float inv_area = 1.0f / static_cast<float>(size_ * size_);
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* x = in.data() + p * in_h_ * in_w_;
    float* y = out.data() + p * out_h_ * out_w_;
    std::int32_t* arg = mode_ == Mode::max ? argmax_.data() + p * out_h_ * out_w_ : nullptr;
    for (std::int64_t oh = 0; oh < out_h_; ++oh) {
      for (std::int64_t ow = 0; ow < out_w_; ++ow) {
        const std::int64_t h0 = oh * stride_, w0 = ow * stride_;
        if (mode_ == Mode::max) {
          std::int64_t best = h0 * in_w_ + w0;
          for (int kh = 0; kh < size_; ++kh)
            for (int kw = 0; kw < size_; ++kw) {
              const std::int64_t at = (h0 + kh) * in_w_ + w0 + kw;
              if (x[at] > x[best]) best = at;
            }
          y[oh * out_w_ + ow] = x[best];
          arg[oh * out_w_ + ow] = static_cast<std::int32_t>(best);
        } else {
          float sum = 0.0f;
          for (int kh = 0; kh < size_; ++kh)
            for (int kw = 0; kw < size_; ++kw) sum += x[(h0 + kh) * in_w_ + w0 + kw];
          y[oh * out_w_ + ow] = sum * inv_area;
        }
      }
    }
  }
}

void Pool2DLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out, Tensor* grad_in) {
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape());
  grad_in->fill(0.0f);
  const std::int64_t planes = in.dim(0) * channels_;
  const float inv_area = 1.0f / static_cast<float>(size_ * size_);
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* dy = grad_out.data() + p * out_h_ * out_w_;
    float* dx = grad_in->data() + p * in_h_ * in_w_;
    if (mode_ == Mode::max) {
      const std::int32_t* arg = argmax_.data() + p * out_h_ * out_w_;
      for (std::int64_t i = 0; i < out_h_ * out_w_; ++i) dx[arg[i]] += dy[i];
      continue;
    }
    for (std::int64_t oh = 0; oh < out_h_; ++oh)
      for (std::int64_t ow = 0; ow < out_w_; ++ow) {
        const float g = dy[oh * out_w_ + ow] * inv_area;
        for (int kh = 0; kh < size_; ++kh)
          for (int kw = 0; kw < size_; ++kw) dx[(oh * stride_ + kh) * in_w_ + ow * stride_ + kw] += g;
      }
  }
}

}  // namespace strata
