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

  // Changes the shape; reallocates only when the element count grows.
  void resize(const Shape& shape);
  // Same elements, new shape; the element count must match.
  void reshape(const Shape& shape);
  void fill(float value);

 private:
  Shape shape_;
  std::vector<float> values_;
  Device device_ = Device::cpu;
};

}  // namespace strata
