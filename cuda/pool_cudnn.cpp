#include "cuda/pool_cudnn.hpp"

#include "cuda/cuda_check.hpp"

namespace strata::cuda {

struct Pooling::Descriptors {
  cudnnTensorDescriptor_t input = nullptr, output = nullptr;
  cudnnPoolingDescriptor_t pooling = nullptr;
  ~Descriptors() {
    if (pooling != nullptr) static_cast<void>(cudnnDestroyPoolingDescriptor(pooling));
    if (output != nullptr) static_cast<void>(cudnnDestroyTensorDescriptor(output));
    if (input != nullptr) static_cast<void>(cudnnDestroyTensorDescriptor(input));
  }
};

Pooling::Pooling(const CudnnHandle& cudnn, const PoolShape& s)
    : cudnn_(cudnn), d_(std::make_unique<Descriptors>()) {
  const auto n = static_cast<int>(s.batch), c = static_cast<int>(s.channels);
  check(cudnnCreateTensorDescriptor(&d_->input), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&d_->output), "cudnnCreateTensorDescriptor");
  check(cudnnCreatePoolingDescriptor(&d_->pooling), "cudnnCreatePoolingDescriptor");
  check(cudnnSetTensor4dDescriptor(d_->input, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c,
                                   static_cast<int>(s.height), static_cast<int>(s.width)),
        "cudnnSetTensor4dDescriptor (pool input)");
  check(
      cudnnSetTensor4dDescriptor(d_->output, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c,
                                 static_cast<int>(s.out_height()), static_cast<int>(s.out_width())),
      "cudnnSetTensor4dDescriptor (pool output)");
  // Deterministic max pooling: the backward pass gives each gradient to one element.
  const cudnnPoolingMode_t mode =
      s.max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  check(cudnnSetPooling2dDescriptor(d_->pooling, mode, CUDNN_NOT_PROPAGATE_NAN, s.size, s.size, 0,
                                    0, s.stride, s.stride),
        "cudnnSetPooling2dDescriptor");
}

Pooling::~Pooling() = default;

void Pooling::forward(const float* in, float* out) const {
  const float one = 1.0f, zero = 0.0f;
  check(cudnnPoolingForward(cudnn_.get(), d_->pooling, &one, d_->input, in, &zero, d_->output, out),
        "cudnnPoolingForward");
}

void Pooling::backward(const float* in, const float* out, const float* grad_out,
                       float* grad_in) const {
  const float one = 1.0f, zero = 0.0f;
  check(cudnnPoolingBackward(cudnn_.get(), d_->pooling, &one, d_->output, out, d_->output, grad_out,
                             d_->input, in, &zero, d_->input, grad_in),
        "cudnnPoolingBackward");
}

}  // namespace strata::cuda
