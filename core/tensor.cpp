#include "core/tensor.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace strata {

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument(fmt::format("negative dimension in shape {}", shape_string(shape)));
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

Tensor::Tensor(Shape shape, Device device)
    : shape_(std::move(shape)), values_(static_cast<std::size_t>(element_count(shape_)), 0.0f), device_(device) {
  if (device_ != Device::cpu) throw std::invalid_argument("only CPU tensors are supported in this build");
}

Tensor::Tensor(Shape shape, std::vector<float> values) : shape_(std::move(shape)), values_(std::move(values)) {
  if (element_count(shape_) != static_cast<std::int64_t>(values_.size()))
    throw std::invalid_argument(fmt::format("tensor shape {} needs {} values, got {}", shape_string(shape_),
                                            element_count(shape_), values_.size()));
}

void Tensor::resize(const Shape& shape) {
  shape_ = shape;
  values_.resize(static_cast<std::size_t>(element_count(shape_)));
}

void Tensor::reshape(const Shape& shape) {
  if (element_count(shape) != size())
    throw std::invalid_argument(
        fmt::format("cannot reshape {} into {}", shape_string(shape_), shape_string(shape)));
  shape_ = shape;
}

void Tensor::fill(float value) { std::fill(values_.begin(), values_.end(), value); }

}  // namespace strata
