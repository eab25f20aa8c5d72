// The one door through which every stateful part saves and restores itself: named tensors and
// scalars, like a state dict.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

// Where a rank's local tensor lies inside the whole (logical) tensor: model-parallel shards hold a
// slice along one axis. A checkpoint stores whole tensors, so that any other decomposition can
// read the slice it needs.
struct ShardSpec {
  Shape whole;              // the logical tensor's shape
  int axis = -1;            // the axis the local part is a slice of; -1: the local part is whole
  std::int64_t offset = 0;  // first index of the local part along `axis`

  static ShardSpec whole_tensor(const Shape& shape) { return {shape, -1, 0}; }
  // The local part's shape: `whole` with `axis` cut to `extent`.
  Shape local_shape(std::int64_t extent) const;
  bool operator==(const ShardSpec&) const = default;
};

struct StateTensor {
  ShardSpec shard;
  Shape local_shape;
  std::vector<float> values;  // the local part, row-major
};

using StateScalar = std::variant<std::int64_t, double, std::string>;

// An ordered map of keys ("weights/dense_1/weight", "trainer/global_step") to tensors and scalars.
// A part saves by putting its entries under its own prefix, and restores by reading them back; a
// missing key or a tensor of another shape throws DataError naming the key, so a checkpoint of
// another model is reported rather than half loaded.
class StateDict {
 public:
  void put_tensor(const std::string& key, std::span<const float> local, const Shape& local_shape,
                  const ShardSpec& shard);
  void put_tensor(const std::string& key, const Tensor& whole) {
    put_tensor(key, whole.values(), whole.shape(), ShardSpec::whole_tensor(whole.shape()));
  }
  void put_int(const std::string& key, std::int64_t value) { scalars_[key] = value; }
  void put_real(const std::string& key, double value) { scalars_[key] = value; }
  void put_text(const std::string& key, std::string value) { scalars_[key] = std::move(value); }

  bool has_tensor(const std::string& key) const { return tensors_.contains(key); }
  bool has_scalar(const std::string& key) const { return scalars_.contains(key); }
  // Copies the part of tensor `key` that `shard` describes into `local` (of `local_shape`). The
  // stored tensor must be whole, or exactly the same slice.
  void read_tensor(const std::string& key, std::span<float> local, const Shape& local_shape,
                   const ShardSpec& shard) const;
  void read_tensor(const std::string& key, Tensor& whole) const {
    read_tensor(key, whole.values(), whole.shape(), ShardSpec::whole_tensor(whole.shape()));
  }
  const StateTensor& tensor(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  double get_real(const std::string& key) const;
  std::string get_text(const std::string& key) const;

  std::map<std::string, StateTensor>& tensors() { return tensors_; }
  const std::map<std::string, StateTensor>& tensors() const { return tensors_; }
  const std::map<std::string, StateScalar>& scalars() const { return scalars_; }
  std::map<std::string, StateScalar>& scalars() { return scalars_; }
  // Adds every entry of `other` under `prefix` + "/".
  void merge(const StateDict& other, const std::string& prefix);

 private:
  const StateScalar& scalar(const std::string& key) const;

  std::map<std::string, StateTensor> tensors_;
  std::map<std::string, StateScalar> scalars_;
};

// Copies `whole`'s slice that `shard` (with local extent `local_shape[axis]`) names into `local`.
void copy_slice(std::span<const float> whole, const ShardSpec& shard, const Shape& local_shape,
                std::span<float> local);

}  // namespace strata
