#include "core/state.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

Shape ShardSpec::local_shape(std::int64_t extent) const {
  Shape shape = whole;
  if (axis >= 0) shape.at(static_cast<std::size_t>(axis)) = extent;
  return shape;
}

void copy_slice(std::span<const float> whole, const ShardSpec& shard, const Shape& local_shape,
                std::span<float> local) {
  if (static_cast<std::int64_t>(local.size()) != element_count(local_shape) ||
      static_cast<std::int64_t>(whole.size()) != element_count(shard.whole))
    throw std::invalid_argument("copy_slice: buffer sizes do not match the shapes");
  if (shard.axis < 0) {
    std::copy(whole.begin(), whole.end(), local.begin());
    return;
  }
  const auto axis = static_cast<std::size_t>(shard.axis);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= shard.whole[i];
  for (std::size_t i = axis + 1; i < shard.whole.size(); ++i) inner *= shard.whole[i];
  const std::int64_t extent = local_shape[axis], full = shard.whole[axis];
  if (shard.offset < 0 || shard.offset + extent > full)
    throw std::invalid_argument("copy_slice: the slice lies outside the whole tensor");
  for (std::int64_t o = 0; o < outer; ++o)
    std::copy_n(whole.data() + (o * full + shard.offset) * inner, extent * inner,
                local.data() + o * extent * inner);
}

void StateDict::put_tensor(const std::string& key, std::span<const float> local,
                           const Shape& local_shape, const ShardSpec& shard) {
  if (static_cast<std::int64_t>(local.size()) != element_count(local_shape))
    throw std::invalid_argument(fmt::format("state {}: {} values for shape {}", key, local.size(),
                                            shape_string(local_shape)));
  // An entry of this key from an earlier save keeps its buffer: a checkpoint every few minutes
  // then copies into memory it already has instead of faulting in new pages.
  StateTensor& t = tensors_[key];
  t.shard = shard;
  t.local_shape = local_shape;
  t.values.assign(local.begin(), local.end());
}

const StateTensor& StateDict::tensor(const std::string& key) const {
  const auto it = tensors_.find(key);
  if (it == tensors_.end()) throw DataError(fmt::format("tensor {} is missing", key));
  return it->second;
}

void StateDict::read_tensor(const std::string& key, std::span<float> local,
                            const Shape& local_shape, const ShardSpec& shard) const {
  const StateTensor& stored = tensor(key);
  if (stored.shard.whole != shard.whole)
    throw DataError(fmt::format("tensor {} has shape {} but {} is needed", key,
                                shape_string(stored.shard.whole), shape_string(shard.whole)));
  if (stored.shard == shard && stored.local_shape == local_shape) {
    std::copy(stored.values.begin(), stored.values.end(), local.begin());
    return;
  }
  if (stored.shard.axis >= 0)
    throw DataError(fmt::format("tensor {} holds a slice, not the whole tensor", key));
  copy_slice(stored.values, shard, local_shape, local);
}

const StateScalar& StateDict::scalar(const std::string& key) const {
  const auto it = scalars_.find(key);
  if (it == scalars_.end()) throw DataError(fmt::format("value {} is missing", key));
  return it->second;
}

std::int64_t StateDict::get_int(const std::string& key) const {
  const auto& v = scalar(key);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  throw DataError(fmt::format("value {} is not an integer", key));
}

double StateDict::get_real(const std::string& key) const {
  const auto& v = scalar(key);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  throw DataError(fmt::format("value {} is not a number", key));
}

std::string StateDict::get_text(const std::string& key) const {
  const auto& v = scalar(key);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  throw DataError(fmt::format("value {} is not text", key));
}

void StateDict::merge(const StateDict& other, const std::string& prefix) {
  const std::string under = prefix + "/";
  for (const auto& [key, t] : other.tensors_) tensors_[under + key] = t;
  for (const auto& [key, s] : other.scalars_) scalars_[under + key] = s;
}

}  // namespace strata
