// 2-D max and average pooling on cuDNN over NCHW floats without padding, as Pool2DLayer: one
// object per shape, its descriptors made once.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "cuda/conv_cudnn.hpp"

namespace strata::cuda {

struct PoolShape {
  std::int64_t batch = 0, channels = 0, height = 0, width = 0;
  int size = 2, stride = 2;
  bool max = true;  // else average
  std::int64_t out_height() const { return (height - size) / stride + 1; }
  std::int64_t out_width() const { return (width - size) / stride + 1; }
};

class Pooling {
 public:
  Pooling(const CudnnHandle& cudnn, const PoolShape& shape);
  ~Pooling();
  Pooling(const Pooling&) = delete;
  Pooling& operator=(const Pooling&) = delete;

  void forward(const float* in, float* out) const;
  // grad_in is overwritten; max pooling routes each gradient to its window's maximum (the input
  // and output of the forward pass say where).
  void backward(const float* in, const float* out, const float* grad_out, float* grad_in) const;

 private:
  struct Descriptors;
  const CudnnHandle& cudnn_;
  std::unique_ptr<Descriptors> d_;
};

}  // namespace strata::cuda
