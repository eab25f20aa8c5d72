// DeviceModel's optimizer step and its state door: parameters and moments between the host's
// Model and Optimizer and the device.
#include <cmath>
#include <span>
#include <stdexcept>
#include <utility>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_model.hpp"

namespace strata::cuda {

namespace {

void fill_zero(const DeviceBuffer& buffer, const Stream& stream) {
  check(cudaMemsetAsync(buffer.data(), 0, buffer.size() * sizeof(float), stream.get()),
        "cudaMemsetAsync");
}

// A DeviceModel's state in page-locked host buffers, arriving on the copy stream.
class DeviceStateCopy final : public StateCopy {
 public:
  DeviceStateCopy(int device, std::shared_ptr<std::vector<std::unique_ptr<PinnedFloats>>> pinned,
                  std::vector<const Tensor*> hosts)
      : device_(device), pinned_(std::move(pinned)), hosts_(std::move(hosts)) {}
  Event& arrived() { return arrived_; }
  void wait() override {
    // The waiting thread (a checkpoint writer) may never have used this GPU.
    check(cudaSetDevice(device_), "cudaSetDevice");
    arrived_.synchronize();
  }
  std::span<const float> values_of(const Tensor* host) const override {
    for (std::size_t i = 0; i < hosts_.size(); ++i)
      if (hosts_[i] == host) return {(*pinned_)[i]->data(), (*pinned_)[i]->size()};
    throw std::invalid_argument("DeviceStateCopy: a tensor this copy does not hold");
  }

 private:
  int device_;
  std::shared_ptr<std::vector<std::unique_ptr<PinnedFloats>>> pinned_;
  std::vector<const Tensor*> hosts_;  // what (*pinned_)[i] is the copy of
  Event arrived_;
};

}  // namespace

void DeviceModel::upload_parameters() {
  wait_for_state_copy();
  for (Parameter& p : params_) copy_to_device(p.host.value->values(), p.value, context_.stream);
  context_.stream.synchronize();
}

void DeviceModel::download_parameters() {
  for (Parameter& p : params_) copy_to_host(p.value, p.host.value->values(), context_.stream);
  context_.stream.synchronize();
}

void DeviceModel::apply_step(double lr) {
  wait_for_state_copy();
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
  wait_for_state_copy();
  const auto moments = optimizer.moments(params);
  check_moments(moments.size());
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
  check_moments(moments.size());
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

void DeviceModel::check_moments(std::size_t moments) const {
  if (moments != (optimizer_.kind == OptimizerKind::adam ? 2u : 1u))
    throw std::invalid_argument("DeviceModel: the host optimizer is not of this model's kind");
}

std::unique_ptr<StateCopy> DeviceModel::start_state_copy(const std::vector<Param>& params,
                                                         Optimizer& optimizer) {
  const auto moments = optimizer.moments(params);
  check_moments(moments.size());
  ensure_moments();
  std::vector<const Tensor*> hosts;
  std::vector<const DeviceBuffer*> sources;
  for (const Parameter& p : params_) {
    hosts.push_back(p.host.value);
    sources.push_back(&p.value);
  }
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Parameter& p = bound_to(params[k].value);
    hosts.push_back(&(*moments[0])[k]);
    sources.push_back(&p.first);
    if (moments.size() > 1) {
      hosts.push_back(&(*moments[1])[k]);
      sources.push_back(&p.second);
    }
  }
  // The buffers of the last copy, unless a checkpoint still holds them.
  if (pinned_ == nullptr || pinned_.use_count() > 1 || pinned_->size() != sources.size()) {
    pinned_ = std::make_shared<std::vector<std::unique_ptr<PinnedFloats>>>();
    for (const DeviceBuffer* source : sources)
      pinned_->push_back(std::make_unique<PinnedFloats>(source->size()));
  }
  auto copy =
      std::make_unique<DeviceStateCopy>(context_.allocator.device(), pinned_, std::move(hosts));
  copy_start_.order(context_.stream, context_.copies);
  for (std::size_t i = 0; i < sources.size(); ++i)
    check(cudaMemcpyAsync((*pinned_)[i]->data(), sources[i]->data(),
                          sources[i]->size() * sizeof(float), cudaMemcpyDeviceToHost,
                          context_.copies.get()),
          "cudaMemcpyAsync (a state copy to the host)");
  copy->arrived().record(context_.copies);
  state_copy_pending_ = true;
  optimizer.set_steps_taken(steps_);
  return copy;
}

void DeviceModel::wait_for_state_copy() {
  if (!state_copy_pending_) return;
  copy_end_.order(context_.copies, context_.stream);
  state_copy_pending_ = false;
}

}  // namespace strata::cuda
