#include "cuda/conv_cudnn.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "cuda/cuda_check.hpp"

namespace strata::cuda {

void check(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw CudaError(fmt::format("{} failed: {} ({})", call, static_cast<int>(status),
                                cudnnGetErrorString(status)));
}

CudnnHandle::CudnnHandle(cudaStream_t stream) {
  check(cudnnCreate(&handle_), "cudnnCreate");
  check(cudnnSetStream(handle_, stream), "cudnnSetStream");
}

CudnnHandle::~CudnnHandle() {
  if (handle_ != nullptr) static_cast<void>(cudnnDestroy(handle_));
}

namespace {

template <typename Descriptor, cudnnStatus_t (*create)(Descriptor*),
          cudnnStatus_t (*destroy)(Descriptor)>
class Owned {
 public:
  Owned() { check(create(&d_), "cudnnCreate...Descriptor"); }
  ~Owned() { static_cast<void>(destroy(d_)); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Descriptor get() const { return d_; }

 private:
  Descriptor d_ = nullptr;
};

using TensorDesc =
    Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                       cudnnDestroyConvolutionDescriptor>;

int as_int(std::int64_t n) {
  return static_cast<int>(n);
}

// The first result that succeeded, is deterministic, computes in plain fp32 (CUDNN_FMA_MATH:
// no TF32, so that it matches the CPU) and fits the limit: cuDNN lists them fastest first.
template <typename Perf, std::size_t N>
const Perf& pick(const std::array<Perf, N>& results, int count, std::size_t limit,
                 const char* pass) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    if (r.status == CUDNN_STATUS_SUCCESS && r.determinism == CUDNN_DETERMINISTIC &&
        r.mathType == CUDNN_FMA_MATH && r.memory <= limit)
      return r;
  }
  throw CudaError(
      fmt::format("cuDNN offers no deterministic {} algorithm within {} bytes of "
                  "workspace ({} candidates)",
                  pass, limit, count));
}

}  // namespace

struct Convolution::Descriptors {
  TensorDesc input, output, bias;
  FilterDesc filter;
  ConvDesc conv;
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
};

Convolution::Convolution(const CudnnHandle& cudnn, const ConvShape& s, DeviceAllocator& allocator,
                         std::size_t workspace_limit)
    : cudnn_(cudnn), shape_(s), d_(std::make_unique<Descriptors>()) {
  check(cudnnSetTensor4dDescriptor(d_->input.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                   as_int(s.batch), as_int(s.channels), as_int(s.height),
                                   as_int(s.width)),
        "cudnnSetTensor4dDescriptor (input)");
  check(cudnnSetTensor4dDescriptor(d_->output.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                   as_int(s.batch), s.filters, as_int(s.out_height()),
                                   as_int(s.out_width())),
        "cudnnSetTensor4dDescriptor (output)");
  check(cudnnSetTensor4dDescriptor(d_->bias.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                   s.filters, 1, 1),
        "cudnnSetTensor4dDescriptor (bias)");
  check(cudnnSetFilter4dDescriptor(d_->filter.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.filters,
                                   as_int(s.channels), s.kernel, s.kernel),
        "cudnnSetFilter4dDescriptor");
  // Cross-correlation, as oneDNN and every framework compute a "convolution"; fp32 math.
  check(cudnnSetConvolution2dDescriptor(d_->conv.get(), s.padding, s.padding, s.stride, s.stride, 1,
                                        1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionMathType(d_->conv.get(), CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");

  constexpr int candidates = 8;
  int count = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, candidates> fwd{};
  check(cudnnGetConvolutionForwardAlgorithm_v7(cudnn.get(), d_->input.get(), d_->filter.get(),
                                               d_->conv.get(), d_->output.get(), candidates, &count,
                                               fwd.data()),
        "cudnnGetConvolutionForwardAlgorithm_v7");
  const auto& f = pick(fwd, count, workspace_limit, "forward");
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, candidates> data{};
  check(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn.get(), d_->filter.get(), d_->output.get(),
                                                    d_->conv.get(), d_->input.get(), candidates,
                                                    &count, data.data()),
        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  const auto& b = pick(data, count, workspace_limit, "backward-data");
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, candidates> filter{};
  check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            cudnn.get(), d_->input.get(), d_->output.get(), d_->conv.get(), d_->filter.get(),
            candidates, &count, filter.data()),
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  const auto& w = pick(filter, count, workspace_limit, "backward-filter");
  d_->forward_algo = f.algo;
  d_->data_algo = b.algo;
  d_->filter_algo = w.algo;
  // The workspace each chosen algorithm needs under this descriptor, as cuDNN states it.
  std::size_t forward_bytes = 0, data_bytes = 0, filter_bytes = 0;
  check(cudnnGetConvolutionForwardWorkspaceSize(cudnn.get(), d_->input.get(), d_->filter.get(),
                                                d_->conv.get(), d_->output.get(), f.algo,
                                                &forward_bytes),
        "cudnnGetConvolutionForwardWorkspaceSize");
  check(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn.get(), d_->filter.get(),
                                                     d_->output.get(), d_->conv.get(),
                                                     d_->input.get(), b.algo, &data_bytes),
        "cudnnGetConvolutionBackwardDataWorkspaceSize");
  check(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn.get(), d_->input.get(),
                                                       d_->output.get(), d_->conv.get(),
                                                       d_->filter.get(), w.algo, &filter_bytes),
        "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  const std::size_t bytes =
      std::max({f.memory, b.memory, w.memory, forward_bytes, data_bytes, filter_bytes});
  if (bytes > 0) workspace_ = allocator.allocate((bytes + sizeof(float) - 1) / sizeof(float));
}

Convolution::~Convolution() = default;

void Convolution::forward(const float* in, const float* weight, const float* bias,
                          float* out) const {
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionForward(cudnn_.get(), &one, d_->input.get(), in, d_->filter.get(), weight,
                                d_->conv.get(), d_->forward_algo, workspace_.data(),
                                workspace_.size() * sizeof(float), &zero, d_->output.get(), out),
        "cudnnConvolutionForward");
  check(cudnnAddTensor(cudnn_.get(), &one, d_->bias.get(), bias, &one, d_->output.get(), out),
        "cudnnAddTensor (bias)");
}

void Convolution::backward(const float* in, const float* weight, const float* grad_out,
                           float* weight_grad, float* bias_grad, float* grad_in) const {
  const float one = 1.0f, zero = 0.0f;
  const std::size_t workspace_bytes = workspace_.size() * sizeof(float);
  check(cudnnConvolutionBackwardFilter(cudnn_.get(), &one, d_->input.get(), in, d_->output.get(),
                                       grad_out, d_->conv.get(), d_->filter_algo, workspace_.data(),
                                       workspace_bytes, &zero, d_->filter.get(), weight_grad),
        "cudnnConvolutionBackwardFilter");
  check(cudnnConvolutionBackwardBias(cudnn_.get(), &one, d_->output.get(), grad_out, &zero,
                                     d_->bias.get(), bias_grad),
        "cudnnConvolutionBackwardBias");
  if (grad_in == nullptr) return;
  check(cudnnConvolutionBackwardData(cudnn_.get(), &one, d_->filter.get(), weight, d_->output.get(),
                                     grad_out, d_->conv.get(), d_->data_algo, workspace_.data(),
                                     workspace_bytes, &zero, d_->input.get(), grad_in),
        "cudnnConvolutionBackwardData");
}

std::string Convolution::algorithms() const {
  return fmt::format("forward {}, data {}, filter {}", static_cast<int>(d_->forward_algo),
                     static_cast<int>(d_->data_algo), static_cast<int>(d_->filter_algo));
}

}  // namespace strata::cuda
