#include "cuda/device_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/loss.hpp"
#include "core/shape_layers.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_model_stage.hpp"
#include "cuda/pool_cudnn.hpp"

namespace strata::cuda {

namespace {

Activation activation_of(LayerKind kind) {
  switch (kind) {
    case LayerKind::leaky_relu:
      return Activation::leaky_relu;
    case LayerKind::tanh:
      return Activation::tanh;
    case LayerKind::sigmoid:
      return Activation::sigmoid;
    default:
      return Activation::relu;
  }
}

void copy_device(const float* from, float* to, std::int64_t n, const Stream& stream) {
  check(cudaMemcpyAsync(to, from, static_cast<std::size_t>(n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, stream.get()),
        "cudaMemcpyAsync on the device");
}

}  // namespace

DeviceModel::DeviceModel(Model& host, const std::vector<LayerSpec>& specs,
                         const OptimizerSpec& optimizer, DeviceContext& context,
                         ShardCollectives* shards)
    : context_(context), optimizer_(optimizer), shards_(shards) {
  Shape shape = host.input_shape();
  std::size_t spec = 0;
  for (std::size_t i = 0; i < host.layer_count(); ++i, ++spec) {
    if (spec >= specs.size())
      throw std::invalid_argument("DeviceModel: the specs end before the model's layers");
    const LayerSpec& s = specs[spec];
    Layer& layer = host.layer(i);
    Stage st;
    st.name = layer.name();
    st.in_shape = shape;
    st.out_shape = host.output_shape(i);
    st.in_size = element_count(st.in_shape);
    st.out_size = element_count(st.out_shape);
    const std::string kind = layer.kind();
    auto expect = [&](const char* want) {
      if (kind != want)
        throw std::invalid_argument(fmt::format(
            "DeviceModel: layer {} is {} here, where its spec makes {}", st.name, kind, want));
    };
    if (kind == "dense/column" || kind == "conv2d/column")
      st.split = Stage::Split::column;
    else if (kind == "dense/row")
      st.split = Stage::Split::row;
    if (st.split != Stage::Split::none && shards_ == nullptr)
      throw std::invalid_argument(fmt::format(
          "DeviceModel: layer {} is split over model shards, and no shards were given", st.name));
    switch (s.kind) {
      case LayerKind::dense:
        expect(st.split == Stage::Split::none     ? "dense"
               : st.split == Stage::Split::column ? "dense/column"
                                                  : "dense/row");
        st.kind = Stage::Kind::dense;
        break;
      case LayerKind::conv2d:
        st.kind = Stage::Kind::conv;
        st.relu = kind == "conv2d+relu";
        expect(st.split != Stage::Split::none ? "conv2d/column"
               : st.relu                      ? "conv2d+relu"
                                              : "conv2d");
        st.conv = {0,         st.in_shape[0], st.in_shape[1], st.in_shape[2],
                   s.filters, s.kernel,       s.stride,       s.padding};
        if (st.relu) ++spec;  // the relu spec the Model fused into the conv
        break;
      case LayerKind::maxpool2d:
      case LayerKind::avgpool2d:
        expect(s.kind == LayerKind::maxpool2d ? "maxpool2d" : "avgpool2d");
        st.kind = Stage::Kind::pool;
        st.pool = {0,
                   st.in_shape[0],
                   st.in_shape[1],
                   st.in_shape[2],
                   s.size,
                   s.stride,
                   s.kind == LayerKind::maxpool2d};
        break;
      case LayerKind::flatten:
        expect("flatten");
        st.kind = Stage::Kind::flatten;
        break;
      case LayerKind::dropout:
        expect("dropout");
        st.kind = Stage::Kind::dropout;
        st.rate = s.rate;
        st.dropout = dynamic_cast<const DropoutLayer*>(&layer);
        break;
      case LayerKind::relu:
      case LayerKind::tanh:
      case LayerKind::sigmoid:
      case LayerKind::leaky_relu:
        expect(to_string(s.kind));
        st.kind = Stage::Kind::activation;
        st.activation = activation_of(s.kind);
        st.alpha = s.alpha;
        break;
    }
    for (const Param& p : host.params_of(i)) {
      const bool is_weight = p.name.ends_with("/weight");
      (is_weight ? st.weight : st.bias) = static_cast<int>(params_.size());
      Parameter param;
      param.host = p;
      const auto n = static_cast<std::size_t>(p.value->size());
      param.value = context_.allocator.allocate(n);
      param.grad = context_.allocator.allocate(n);
      params_.push_back(std::move(param));
    }
    if (st.split == Stage::Split::column) {
      // The shard's weight is its slice of the filters or output units.
      const std::int64_t mine = params_[static_cast<std::size_t>(st.weight)].host.value->dim(0);
      // conv: each filter's output plane; dense: one unit each.
      st.shard_out = st.kind == Stage::Kind::conv ? st.out_size / s.filters * mine : mine;
      st.gather = st.shard_out != st.out_size;
      st.conv.filters = static_cast<int>(mine);
    }
    shape = st.out_shape;
    stages_.push_back(std::move(st));
  }
  outputs_.resize(stages_.size());
  grads_.resize(stages_.size());
  upload_parameters();
}

DeviceModel::~DeviceModel() {
  // A state copy still reading the parameters finishes before their memory goes back.
  if (state_copy_pending_) static_cast<void>(cudaStreamSynchronize(context_.copies.get()));
}

const DeviceBuffer& DeviceModel::forward(const Tensor& images, bool training, std::uint64_t step,
                                         std::uint64_t first_sample) {
  const std::int64_t batch = images.dim(0);
  DeviceAllocator& allocator = context_.allocator;
  const cudaStream_t stream = context_.stream.get();
  resize(allocator, input_, images.size());
  copy_to_device(images.values(), input_, context_.stream);
  const DeviceBuffer* in = &input_;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    Stage& st = stages_[i];
    DeviceBuffer& out = outputs_[i];
    resize(allocator, out, batch * st.out_size);
    switch (st.kind) {
      case Stage::Kind::dense:
        if (st.split != Stage::Split::none)
          split_forward(st, in->data(), out.data(), batch);
        else
          dense_forward(context_.blas, {batch, st.in_size, st.out_size}, in->data(),
                        params_[static_cast<std::size_t>(st.weight)].value.data(),
                        params_[static_cast<std::size_t>(st.bias)].value.data(), out.data(),
                        stream);
        break;
      case Stage::Kind::conv:
        if (!st.convolution || st.conv.batch != batch) {
          st.conv.batch = batch;
          st.convolution.reset();  // its workspace back to the cache first
          st.convolution = std::make_unique<Convolution>(context_.cudnn, st.conv, allocator);
        }
        if (st.split != Stage::Split::none)
          split_forward(st, in->data(), out.data(), batch);
        else
          st.convolution->forward(
              in->data(), params_[static_cast<std::size_t>(st.weight)].value.data(),
              params_[static_cast<std::size_t>(st.bias)].value.data(), out.data());
        if (st.relu)
          activation_forward(Activation::relu, 0.0f, out.data(), out.data(), batch * st.out_size,
                             stream);
        break;
      case Stage::Kind::pool:
        if (!st.pooling || st.pool.batch != batch) {
          st.pool.batch = batch;
          st.pooling = std::make_unique<Pooling>(context_.cudnn, st.pool);
        }
        st.pooling->forward(in->data(), out.data());
        break;
      case Stage::Kind::flatten:
        copy_device(in->data(), out.data(), batch * st.out_size, context_.stream);
        break;
      case Stage::Kind::dropout:
        if (training && st.rate > 0.0f) {
          resize(allocator, st.mask, batch * st.out_size);
          dropout_forward(in->data(), out.data(), st.mask.data(), batch, st.out_size,
                          {st.dropout->key(), step, first_sample, st.rate}, stream);
        } else {
          copy_device(in->data(), out.data(), batch * st.out_size, context_.stream);
        }
        break;
      case Stage::Kind::activation:
        activation_forward(st.activation, st.alpha, in->data(), out.data(), batch * st.out_size,
                           stream);
        break;
    }
    in = &out;
  }
  batch_ = batch;
  return *in;
}

const DeviceBuffer& DeviceModel::forward_backward(const Tensor& images,
                                                  std::span<const std::int32_t> labels,
                                                  double grad_divisor, std::uint64_t step,
                                                  std::uint64_t first_sample,
                                                  bool sum_in_backward) {
  const std::int64_t batch = images.dim(0);
  if (static_cast<std::int64_t>(labels.size()) != batch)
    throw std::invalid_argument(
        fmt::format("DeviceModel: {} labels for a batch of {}", labels.size(), batch));
  DeviceAllocator& allocator = context_.allocator;
  const cudaStream_t stream = context_.stream.get();
  const DeviceBuffer& logits = forward(images, true, step, first_sample);
  const std::int64_t classes = stages_.back().out_size;
  // A split model's shards sum over their NCCL communicator on the compute stream: the replica
  // sums (another communicator) wait until backward is done, since NCCL does not promise progress
  // for two communicators' kernels running at once on one GPU.
  const bool overlap_sums = sum_in_backward && shards_ == nullptr;

  // Labels travel as int32 bits in a float buffer: the allocator hands out floats.
  resize(allocator, labels_, batch);
  label_bits_.resize(static_cast<std::size_t>(batch));
  std::memcpy(label_bits_.data(), labels.data(), labels.size_bytes());
  copy_to_device(label_bits_, labels_, context_.stream);
  resize(allocator, row_loss_, batch);
  resize(allocator, grad_logits_, batch * classes);
  softmax_cross_entropy(logits.data(), reinterpret_cast<const std::int32_t*>(labels_.data()),
                        row_loss_.data(), grad_logits_.data(), batch, classes,
                        static_cast<float>(grad_divisor), stream);

  const auto gradients_ready = [&](const Parameter& w, const Parameter& b) {
    if (overlap_sums) hand_to_replica_sum(w, b);
  };
  for (std::size_t i = stages_.size(); i-- > 0;) {
    Stage& st = stages_[i];
    const DeviceBuffer& in = i == 0 ? input_ : outputs_[i - 1];
    const DeviceBuffer& out = outputs_[i];
    const DeviceBuffer& grad_out = i + 1 == stages_.size() ? grad_logits_ : grads_[i];
    DeviceBuffer* grad_in = i == 0 ? nullptr : &grads_[i - 1];
    if (grad_in != nullptr) resize(allocator, *grad_in, batch * st.in_size);
    float* dx = grad_in != nullptr ? grad_in->data() : nullptr;
    switch (st.kind) {
      case Stage::Kind::dense: {
        Parameter& w = params_[static_cast<std::size_t>(st.weight)];
        Parameter& b = params_[static_cast<std::size_t>(st.bias)];
        if (st.split != Stage::Split::none)
          split_backward(st, in.data(), grad_out.data(), dx, batch);
        else
          dense_backward(context_.blas, {batch, st.in_size, st.out_size}, in.data(), w.value.data(),
                         grad_out.data(), w.grad.data(), b.grad.data(), dx, stream);
        gradients_ready(w, b);
        break;
      }
      case Stage::Kind::conv: {
        const float* dy = grad_out.data();
        if (st.relu) {
          // relu(z)' is 1 where the output is positive: the output stands in for z.
          resize(allocator, st.masked_grad, batch * st.out_size);
          activation_backward(Activation::relu, 0.0f, out.data(), out.data(), dy,
                              st.masked_grad.data(), batch * st.out_size, stream);
          dy = st.masked_grad.data();
        }
        Parameter& w = params_[static_cast<std::size_t>(st.weight)];
        Parameter& b = params_[static_cast<std::size_t>(st.bias)];
        if (st.split != Stage::Split::none)
          split_backward(st, in.data(), dy, dx, batch);
        else
          st.convolution->backward(in.data(), w.value.data(), dy, w.grad.data(), b.grad.data(), dx);
        gradients_ready(w, b);
        break;
      }
      case Stage::Kind::pool:
        if (dx != nullptr) st.pooling->backward(in.data(), out.data(), grad_out.data(), dx);
        break;
      case Stage::Kind::flatten:
        if (dx != nullptr) copy_device(grad_out.data(), dx, batch * st.in_size, context_.stream);
        break;
      case Stage::Kind::dropout:
        if (dx != nullptr) {
          if (st.rate > 0.0f)
            dropout_backward(grad_out.data(), st.mask.data(), dx, batch * st.in_size, stream);
          else
            copy_device(grad_out.data(), dx, batch * st.in_size, context_.stream);
        }
        break;
      case Stage::Kind::activation:
        if (dx != nullptr)
          activation_backward(st.activation, st.alpha, in.data(), out.data(), grad_out.data(), dx,
                              batch * st.in_size, stream);
        break;
    }
  }
  if (replica_sum_ != nullptr && overlap_sums) {
    wait_for_compute();
    replica_sum_->finish(context_.stream);
  } else if (sum_in_backward) {
    sum_over_replicas_now();
  }
  return logits;
}

void DeviceModel::wait_for_compute() {
  if (shards_ != nullptr)
    shards_->wait(context_.stream);
  else
    context_.stream.synchronize();
}

void DeviceModel::hand_to_replica_sum(const Parameter& w, const Parameter& b) {
  if (replica_sum_ == nullptr || !w.host.trainable) return;
  const std::array<DeviceGradient, 2> grads{DeviceGradient{w.grad.data(), w.grad.size()},
                                            DeviceGradient{b.grad.data(), b.grad.size()}};
  replica_sum_->layer_ready(grads, context_.stream);
}

void DeviceModel::sum_over_replicas_now() {
  if (replica_sum_ == nullptr) return;
  for (std::size_t i = stages_.size(); i-- > 0;) {
    const Stage& st = stages_[i];
    if (st.kind == Stage::Kind::dense || st.kind == Stage::Kind::conv)
      hand_to_replica_sum(params_[static_cast<std::size_t>(st.weight)],
                          params_[static_cast<std::size_t>(st.bias)]);
  }
  wait_for_compute();
  replica_sum_->finish(context_.stream);
}

GradientEngine::Result DeviceModel::add_micro_batch(const Tensor& images,
                                                    std::span<const std::int32_t> labels,
                                                    double grad_divisor, std::uint64_t step,
                                                    std::uint64_t first_sample, int index,
                                                    int count) {
  if (index < 0 || index >= count)
    throw std::invalid_argument(
        fmt::format("DeviceModel: micro-batch {} of a step of {}", index, count));
  // Backward overwrites the gradients: the sum of the earlier micro-batches waits aside (the two
  // buffers trade places, no copy), then is added back (float addition commutes: the sum is the
  // host accumulation's, bit for bit).
  if (index > 0)
    for (Parameter& p : params_) {
      resize(context_.allocator, p.step_sum, static_cast<std::int64_t>(p.grad.size()));
      std::swap(p.grad, p.step_sum);
    }
  const DeviceBuffer& logits =
      forward_backward(images, labels, grad_divisor, step, first_sample, count == 1);
  if (index > 0)
    for (Parameter& p : params_)
      accumulate(p.step_sum.data(), p.grad.data(), static_cast<std::int64_t>(p.grad.size()),
                 context_.stream.get());
  if (count > 1 && index + 1 == count) sum_over_replicas_now();
  return batch_result(logits, labels);
}

GradientEngine::Result DeviceModel::batch_result(const DeviceBuffer& logits,
                                                 std::span<const std::int32_t> labels) {
  const auto batch = static_cast<std::int64_t>(labels.size());
  std::vector<float> losses(labels.size());
  copy_to_host(row_loss_, losses, context_.stream);
  Tensor host_logits({batch, stages_.back().out_size});
  copy_to_host(logits, host_logits.values(), context_.stream);
  wait_for_compute();
  Result result;
  for (float l : losses) result.loss_sum += l;
  result.correct = count_correct(host_logits, labels);
  return result;
}

GradientEngine::Result DeviceModel::gradients(const Tensor& images,
                                              std::span<const std::int32_t> labels,
                                              double grad_divisor, std::uint64_t step,
                                              std::uint64_t first_sample) {
  upload_parameters();
  const DeviceBuffer& logits = forward_backward(images, labels, grad_divisor, step, first_sample);
  for (Parameter& p : params_) copy_to_host(p.grad, p.host.grad->values(), context_.stream);
  return batch_result(logits, labels);  // synchronizes: the host gradients are complete
}

const Tensor& DeviceModel::logits(const Tensor& images) {
  const DeviceBuffer& logits = forward(images, false, 0, 0);
  host_logits_.resize({images.dim(0), stages_.back().out_size});
  copy_to_host(logits, host_logits_.values(), context_.stream);
  wait_for_compute();
  return host_logits_;
}

std::string DeviceModel::where() const {
  cudaDeviceProp props{};
  const bool named = cudaGetDeviceProperties(&props, context_.allocator.device()) == cudaSuccess;
  return fmt::format("GPU {}{}{}", context_.allocator.device(),
                     named ? fmt::format(" ({})", props.name) : std::string(),
                     shards_ != nullptr ? fmt::format(", model shard {} of {}", shards_->shard(),
                                                      shards_->shards())
                                        : std::string());
}

}  // namespace strata::cuda
