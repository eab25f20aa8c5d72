// DeviceModel's optimizer step and its state door: parameters and moments between the host's
// Model and Optimizer and the device.
#include <cmath>
#include <stdexcept>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_model.hpp"

namespace strata::cuda {

namespace {

void fill_zero(const DeviceBuffer& buffer, const Stream& stream) {
  check(cudaMemsetAsync(buffer.data(), 0, buffer.size() * sizeof(float), stream.get()),
        "cudaMemsetAsync");
}

}  // namespace

void DeviceModel::upload_parameters() {
  for (Parameter& p : params_) copy_to_device(p.host.value->values(), p.value, context_.stream);
  context_.stream.synchronize();
}

void DeviceModel::download_parameters() {
  for (Parameter& p : params_) copy_to_host(p.value, p.host.value->values(), context_.stream);
  context_.stream.synchronize();
}

void DeviceModel::apply_step(double lr) {
  const cudaStream_t stream = context_.stream.get();
  ensure_moments();
  ++steps_;
  const double t = static_cast<double>(steps_);
  for (Parameter& p : params_) {
    if (!p.host.trainable) continue;
    const auto n = static_cast<std::int64_t>(p.value.size());
    const double rate = lr * p.host.lr_scale;
    if (optimizer_.kind == OptimizerKind::adam) {
      AdamStep s;
      s.step_size = static_cast<float>(rate / (1.0 - std::pow(optimizer_.beta1, t)));
      s.inv_bias2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(optimizer_.beta2, t)));
      s.beta1 = static_cast<float>(optimizer_.beta1);
      s.beta2 = static_cast<float>(optimizer_.beta2);
      s.eps = static_cast<float>(optimizer_.eps);
      s.weight_decay = static_cast<float>(optimizer_.weight_decay);
      adam_update(p.value.data(), p.grad.data(), p.first.data(), p.second.data(), n, s, stream);
    } else {
      const SgdStep s{static_cast<float>(rate), static_cast<float>(optimizer_.momentum),
                      static_cast<float>(optimizer_.weight_decay), optimizer_.nesterov,
                      steps_ == 1};
      sgd_update(p.value.data(), p.grad.data(), p.first.data(), n, s, stream);
    }
  }
}

void DeviceModel::ensure_moments() {
  // Made at the first step or upload: the host Trainer's gradient-only path never needs them.
  for (Parameter& p : params_) {
    const std::size_t n = p.value.size();
    if (p.first.empty()) {
      p.first = context_.allocator.allocate(n);
      fill_zero(p.first, context_.stream);
    }
    if (optimizer_.kind == OptimizerKind::adam && p.second.empty()) {
      p.second = context_.allocator.allocate(n);
      fill_zero(p.second, context_.stream);
    }
  }
}

DeviceModel::Parameter& DeviceModel::bound_to(const Tensor* value) {
  for (Parameter& p : params_)
    if (p.host.value == value) return p;
  throw std::invalid_argument("DeviceModel: a parameter of the optimizer is not this model's");
}

void DeviceModel::upload_state(const std::vector<Param>& params, Optimizer& optimizer) {
  const auto moments = optimizer.moments(params);
  if (moments.size() != (optimizer_.kind == OptimizerKind::adam ? 2u : 1u))
    throw std::invalid_argument("DeviceModel: the host optimizer is not of this model's kind");
  ensure_moments();
  for (Parameter& p : params_) copy_to_device(p.host.value->values(), p.value, context_.stream);
  for (std::size_t k = 0; k < params.size(); ++k) {
    Parameter& p = bound_to(params[k].value);
    copy_to_device((*moments[0])[k].values(), p.first, context_.stream);
    if (moments.size() > 1) copy_to_device((*moments[1])[k].values(), p.second, context_.stream);
  }
  steps_ = optimizer.steps_taken();
  context_.stream.synchronize();
}

void DeviceModel::download_state(const std::vector<Param>& params, Optimizer& optimizer) {
  const auto moments = optimizer.moments(params);
  if (moments.size() != (optimizer_.kind == OptimizerKind::adam ? 2u : 1u))
    throw std::invalid_argument("DeviceModel: the host optimizer is not of this model's kind");
  ensure_moments();
  for (Parameter& p : params_) copy_to_host(p.value, p.host.value->values(), context_.stream);
  for (std::size_t k = 0; k < params.size(); ++k) {
    Parameter& p = bound_to(params[k].value);
    copy_to_host(p.first, (*moments[0])[k].values(), context_.stream);
    if (moments.size() > 1) copy_to_host(p.second, (*moments[1])[k].values(), context_.stream);
  }
  optimizer.set_steps_taken(steps_);
  context_.stream.synchronize();
}

}  // namespace strata::cuda
