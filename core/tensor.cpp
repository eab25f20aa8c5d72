#include "core/tensor.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace strata {

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0)
      throw std::invalid_argument(
          fmt::format("negative dimension in shape {}", shape_string(shape)));
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

Tensor::Tensor(Shape shape, Device device)
    : shape_(std::move(shape)),
      values_(static_cast<std::size_t>(element_count(shape_)), 0.0f),
      device_(device) {
  if (device_ != Device::cpu)
    throw std::invalid_argument("only CPU tensors are supported in this build");
}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), values_(std::move(values)) {
  if (element_count(shape_) != static_cast<std::int64_t>(values_.size()))
    throw std::invalid_argument(fmt::format("tensor shape {} needs {} values, got {}",
                                            shape_string(shape_), element_count(shape_),
                                            values_.size()));
}

void Tensor::resize(const Shape& shape, Layout layout) {
  if (layout == Layout::channel_blocked16 && (shape.size() != 4 || shape[1] % 16 != 0))
    throw std::invalid_argument(
        fmt::format("a channel-blocked tensor needs [N,C,H,W] with C a multiple of 16, got {}",
                    shape_string(shape)));
  shape_ = shape;
  layout_ = layout;
  values_.resize(static_cast<std::size_t>(element_count(shape_)));
}

void Tensor::reshape(const Shape& shape) {
  if (layout_ != Layout::plain)
    throw std::invalid_argument("cannot reshape a channel-blocked tensor");
  if (element_count(shape) != size())
    throw std::invalid_argument(
        fmt::format("cannot reshape {} into {}", shape_string(shape_), shape_string(shape)));
  shape_ = shape;
}

void convert_layout(const Tensor& in, Tensor& out, Layout layout) {
  out.resize(in.shape(), layout);
  if (in.layout() == layout) {
    std::copy(in.values().begin(), in.values().end(), out.values().begin());
    return;
  }
  const std::int64_t n = in.dim(0), c = in.dim(1), hw = in.dim(2) * in.dim(3);
  const bool to_blocked = layout == Layout::channel_blocked16;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::int64_t plain = (b * c + ch) * hw + i;
        const std::int64_t blocked = ((b * (c / 16) + ch / 16) * hw + i) * 16 + ch % 16;
        if (to_blocked)
          out[blocked] = in[plain];
        else
          out[plain] = in[blocked];
      }
}

Tensor to_plain(const Tensor& t) {
  Tensor out;
  convert_layout(t, out, Layout::plain);
  return out;
}

void Tensor::fill(float value) {
  std::fill(values_.begin(), values_.end(), value);
}

}  // namespace strata
