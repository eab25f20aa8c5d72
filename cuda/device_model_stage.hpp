// What device_model*.cpp share and no one else sees: DeviceModel's per-layer stage, and resizing
// a device buffer to a batch's size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/model.hpp"
#include "core/shape_layers.hpp"
#include "cuda/conv_cudnn.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/device_model.hpp"
#include "cuda/pool_cudnn.hpp"

namespace strata::cuda {

// One host layer's work on the device. The kinds are few and fixed: a switch in forward() and
// backward() reads top to bottom, where a class per kind would scatter them.
struct DeviceModel::Stage {
  enum class Kind { dense, conv, pool, flatten, dropout, activation };
  Kind kind = Kind::flatten;
  std::string name;
  Shape in_shape, out_shape;  // per sample
  std::int64_t in_size = 0, out_size = 0;
  int weight = -1, bias = -1;  // into params_
  // conv: its ReLU fused (applied after it, its derivative before its backward)
  ConvShape conv;
  bool relu = false;
  std::unique_ptr<Convolution> convolution;  // for conv.batch
  PoolShape pool;
  std::unique_ptr<Pooling> pooling;  // for pool.batch
  Activation activation = Activation::relu;
  float alpha = 0.0f;
  float rate = 0.0f;
  const DropoutLayer* dropout = nullptr;  // its noise key
  DeviceBuffer mask, masked_grad;
  // dense, conv split over the M model shards: this shard holds a slice of the outputs (column:
  // shard_out of them per sample, gathered to all outputs unless a row split reads the slice) or
  // of the inputs (row: its partial products are summed over the shards, then the bias added).
  enum class Split { none, column, row };
  Split split = Split::none;
  std::int64_t shard_out = 0;
  bool gather = false;
  DeviceBuffer shard_output, shard_grad, gathered;
};

// `buffer` holding exactly `floats` floats, reallocated from `allocator` only when its size
// differs.
inline void resize(DeviceAllocator& allocator, DeviceBuffer& buffer, std::int64_t floats) {
  if (buffer.size() != static_cast<std::size_t>(floats))
    buffer = allocator.allocate(static_cast<std::size_t>(floats));
}

}  // namespace strata::cuda
