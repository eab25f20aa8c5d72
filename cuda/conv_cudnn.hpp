// 2-D convolution on cuDNN: forward, backward data and backward filter on NCHW floats, weights
// [filters, channels, k, k] as Conv2DLayer's. Each pass's algorithm is chosen once per shape
// (the fastest deterministic one cuDNN's heuristics name that fits the workspace limit), so
// that a step computes the same sums every time; a Convolution is made per shape and kept.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/device_memory.hpp"

namespace strata::cuda {

// A cuDNN handle bound to one stream, destroyed with its owner.
class CudnnHandle {
 public:
  explicit CudnnHandle(cudaStream_t stream);
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

void check(cudnnStatus_t status, const char* call);

struct ConvShape {
  std::int64_t batch = 0, channels = 0, height = 0, width = 0;
  int filters = 0, kernel = 0, stride = 1, padding = 0;
  std::int64_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  std::int64_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
};

class Convolution {
 public:
  // Descriptors and algorithms for `shape`; the workspace (at most workspace_limit bytes) comes
  // from `allocator`, which must outlive this object. Throws CudaError.
  Convolution(const CudnnHandle& cudnn, const ConvShape& shape, DeviceAllocator& allocator,
              std::size_t workspace_limit = std::size_t{256} << 20);
  ~Convolution();
  Convolution(const Convolution&) = delete;
  Convolution& operator=(const Convolution&) = delete;

  // out = conv(in, weight) + bias.
  void forward(const float* in, const float* weight, const float* bias, float* out) const;
  // weight_grad and bias_grad are overwritten; grad_in (if not null) too.
  void backward(const float* in, const float* weight, const float* grad_out, float* weight_grad,
                float* bias_grad, float* grad_in) const;

  // The algorithms chosen, for the log: "forward 1, data 1, filter 1".
  std::string algorithms() const;

 private:
  struct Descriptors;
  const CudnnHandle& cudnn_;
  ConvShape shape_;
  std::unique_ptr<Descriptors> d_;
  DeviceBuffer workspace_;
};

}  // namespace strata::cuda
