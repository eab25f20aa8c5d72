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
// `channel_blocked8` and `channel_blocked16` are oneDNN's nChw8c and nChw16c: channels in blocks of
// 8 or 16 innermost (a vector register of AVX2 or AVX-512), so that pooling and elementwise loops
// vectorise over channels and convolutions need no reorders between layers. A blocked layout is
// used only when C is a multiple of its block, so every layout holds exactly N*C*H*W floats.
enum class Layout { plain, channel_blocked8, channel_blocked16 };

// The channels in one block of `layout`: 1 for plain.
std::int64_t channel_block(Layout layout);

std::int64_t element_count(const Shape& shape);
std::string shape_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = Device::cpu);
  Tensor(Shape shape, std::vector<float> values);
  // A copy owns its values, also when `other` is bound to storage it does not own.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t axis) const { return shape_.at(axis); }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t size() const { return size_; }
  Device device() const { return device_; }
  bool empty() const { return size() == 0; }

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> values() { return {data_, static_cast<std::size_t>(size_)}; }
  std::span<const float> values() const { return {data_, static_cast<std::size_t>(size_)}; }
  float& operator[](std::int64_t i) { return data_[i]; }
  float operator[](std::int64_t i) const { return data_[i]; }

  Layout layout() const { return layout_; }

  // Changes the shape and layout; reallocates only when the element count grows. A bound tensor
  // keeps its element count (std::logic_error otherwise).
  void resize(const Shape& shape, Layout layout = Layout::plain);
  // Same elements, new shape; the element count must match.
  void reshape(const Shape& shape);
  void fill(float value);

  // Moves the values into `storage` (exactly size() floats, owned by someone else, who must keep
  // it alive as long as this tensor uses it) and works on it from now on: a gradient that backward
  // writes straight into a shared-memory window that other ranks reduce.
  void bind(std::span<float> storage);
  bool bound() const { return bound_; }

 private:
  // After values_ changed: data_ and size_ follow it (unless bound).
  void own() {
    data_ = values_.data();
    size_ = static_cast<std::int64_t>(values_.size());
  }

  Shape shape_;
  std::vector<float> values_;  // empty while bound
  float* data_ = nullptr;      // values_.data(), or the bound storage
  std::int64_t size_ = 0;
  bool bound_ = false;
  Device device_ = Device::cpu;
  Layout layout_ = Layout::plain;
};

// A copy of `t` in the plain NCHW layout (a plain tensor is copied as it is).
Tensor to_plain(const Tensor& t);
// Copies a [N,C,H,W] tensor into `out` in `layout`.
void convert_layout(const Tensor& in, Tensor& out, Layout layout);
// The same on raw values: `shape`'s elements at `in`, held in layout `from`, written to `out` in
// layout `to` (the two must not overlap). For a source that is not a tensor of that shape, such as
// a flattened gradient.
void convert_layout(const float* in, const Shape& shape, Layout from, float* out, Layout to);

}  // namespace strata
