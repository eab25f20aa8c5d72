// Tensor: a contiguous float32 N-D array with a device tag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace strata {

// Where a tensor's storage lives. Only CPU storage exists today; the tag lets a CUDA
// backend be added without changing the callers that already pass it around.
enum class Device { cpu, cuda };

using Shape = std::vector<std::int64_t>;

// How a 4-D [N,C,H,W] tensor's elements are ordered in memory. `plain` is row-major NCHW.
// `channel_blocked16` is oneDNN's nChw16c: channels in blocks of 16 innermost, so that pooling
// and elementwise loops vectorise over channels and convolutions need no reorders between layers.
// It is used only when C is a multiple of 16, so both layouts hold exactly N*C*H*W floats.
enum class Layout { plain, channel_blocked16 };

std::int64_t element_count(const Shape& shape);
std::string shape_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::cpu);
  Tensor(Shape shape, std::vector<float> values);

  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t axis) const { return shape_.at(axis); }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t size() const { return static_cast<std::int64_t>(values_.size()); }
  Device device() const { return device_; }
  bool empty() const { return values_.empty(); }

  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  float& operator[](std::int64_t i) { return values_[static_cast<std::size_t>(i)]; }
  float operator[](std::int64_t i) const { return values_[static_cast<std::size_t>(i)]; }

  Layout layout() const { return layout_; }

  // Changes the shape and layout; reallocates only when the element count grows.
  void resize(const Shape& shape, Layout layout = Layout::plain);
  // Same elements, new shape; the element count must match.
  void reshape(const Shape& shape);
  void fill(float value);

 private:
  Shape shape_;
  std::vector<float> values_;
  Device device_ = Device::cpu;
  Layout layout_ = Layout::plain;
};

// A copy of `t` in the plain NCHW layout (a plain tensor is copied as it is).
Tensor to_plain(const Tensor& t);
// Copies a [N,C,H,W] tensor into `out` in `layout`.
void convert_layout(const Tensor& in, Tensor& out, Layout layout);

}  // namespace strata
