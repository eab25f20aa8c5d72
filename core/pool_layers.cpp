#include "core/pool_layers.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

namespace {

// Pooling walks "planes": one channel of one sample in the plain layout, or a block of 16 channels
// of one sample in the blocked layout, where `lanes` = 16 neighbouring channels sit side by side.
// Writing the lane loop innermost lets the compiler vectorise it over channels.
struct PlaneGeometry {
  std::int64_t planes, lanes, in_h, in_w, out_h, out_w;
};

PlaneGeometry geometry(const Tensor& in, std::int64_t out_h, std::int64_t out_w) {
  const std::int64_t lanes = in.layout() == Layout::channel_blocked16 ? 16 : 1;
  return {in.dim(0) * in.dim(1) / lanes, lanes, in.dim(2), in.dim(3), out_h, out_w};
}

}  // namespace

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

// One plane of pooling; `L` lanes are a compile-time constant so the lane loops vectorise.
template <std::int64_t L>
void pool_plane_forward(const float* x, float* y, std::int32_t* arg, const PlaneGeometry& g, int size,
                        int stride, bool max_mode) {
  const float inv_area = 1.0f / static_cast<float>(size * size);
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      const std::int64_t first = ((oh * stride) * g.in_w + ow * stride) * L;
      float* y_at = y + (oh * g.out_w + ow) * L;
      if (max_mode) {
        std::int32_t* arg_at = arg + (oh * g.out_w + ow) * L;
        for (std::int64_t l = 0; l < L; ++l) {
          y_at[l] = x[first + l];
          arg_at[l] = static_cast<std::int32_t>(first + l);
        }
        for (int kh = 0; kh < size; ++kh)
          for (int kw = 0; kw < size; ++kw) {
            const std::int64_t at = first + (kh * g.in_w + kw) * L;
            for (std::int64_t l = 0; l < L; ++l) {
              const bool bigger = x[at + l] > y_at[l];
              y_at[l] = bigger ? x[at + l] : y_at[l];
              arg_at[l] = bigger ? static_cast<std::int32_t>(at + l) : arg_at[l];
            }
          }
      } else {
        for (std::int64_t l = 0; l < L; ++l) y_at[l] = 0.0f;
        for (int kh = 0; kh < size; ++kh)
          for (int kw = 0; kw < size; ++kw) {
            const std::int64_t at = first + (kh * g.in_w + kw) * L;
            for (std::int64_t l = 0; l < L; ++l) y_at[l] += x[at + l];
          }
        for (std::int64_t l = 0; l < L; ++l) y_at[l] *= inv_area;
      }
    }
  }
}

void Pool2DLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  out.resize({in.dim(0), channels_, out_h_, out_w_}, in.layout());
  const PlaneGeometry g = geometry(in, out_h_, out_w_);
  const std::int64_t in_plane = g.in_h * g.in_w * g.lanes, out_plane = g.out_h * g.out_w * g.lanes;
  const bool max_mode = mode_ == Mode::max;
  if (max_mode) argmax_.resize(static_cast<std::size_t>(out.size()));
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const float* x = in.data() + p * in_plane;
    float* y = out.data() + p * out_plane;
    std::int32_t* arg = max_mode ? argmax_.data() + p * out_plane : nullptr;
    if (g.lanes == 16)
      pool_plane_forward<16>(x, y, arg, g, size_, stride_, max_mode);
    else
      pool_plane_forward<1>(x, y, arg, g, size_, stride_, max_mode);
  }
}

void Pool2DLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out, Tensor* grad_in) {
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape(), in.layout());
  grad_in->fill(0.0f);
  const PlaneGeometry g = geometry(in, out_h_, out_w_);
  const std::int64_t L = g.lanes, in_plane = g.in_h * g.in_w * L, out_plane = g.out_h * g.out_w * L;
  const float inv_area = 1.0f / static_cast<float>(size_ * size_);
  for (std::int64_t p = 0; p < g.planes; ++p) {
    const float* dy = grad_out.data() + p * out_plane;
    float* dx = grad_in->data() + p * in_plane;
    if (mode_ == Mode::max) {
      const std::int32_t* arg = argmax_.data() + p * out_plane;
      for (std::int64_t i = 0; i < out_plane; ++i) dx[arg[i]] += dy[i];
      continue;
    }
    for (std::int64_t oh = 0; oh < g.out_h; ++oh)
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const std::int64_t first = ((oh * stride_) * g.in_w + ow * stride_) * L;
        const float* dy_at = dy + (oh * g.out_w + ow) * L;
        for (int kh = 0; kh < size_; ++kh)
          for (int kw = 0; kw < size_; ++kw) {
            const std::int64_t at = first + (kh * g.in_w + kw) * L;
            for (std::int64_t l = 0; l < L; ++l) dx[at + l] += dy_at[l] * inv_area;
          }
      }
  }
}

}  // namespace strata
