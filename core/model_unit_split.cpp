// Model's passes with a WorkerPool splitting every dense layer's units: each worker computes its
// units of a dense layer and of the activation after it in one run, and owns those columns of
// their outputs and output gradients; only the layers' inputs and the input gradients' parts
// cross between the workers.
#include "core/activation_layers.hpp"
#include "core/dense_layer.hpp"
#include "core/model.hpp"
#include "core/worker_pool.hpp"

namespace strata {

std::size_t Model::forward_units(std::size_t i, const Tensor& in, WorkerPool& pool) {
  const TraceSpan span(trace_, trace_ ? forward_names_[i] : std::string_view(), "compute");
  DenseLayer& dense = *dense_[i];
  const ActivationLayer* activation = grouped_activation_[i];
  dense.prepare_unit_split(pool.size());
  const Shape shape{in.dim(0), output_shapes_[i][0]};
  outputs_[i].resize(shape);
  if (activation != nullptr) outputs_[i + 1].resize(shape);
  pool.run([&](int worker) {
    dense.forward_units(in, outputs_[i], worker);
    if (activation == nullptr) return;
    const auto [first, last] = dense.units_of(worker);
    activation->forward_columns(outputs_[i], outputs_[i + 1], first, last);
  });
  return activation != nullptr ? i + 1 : i;
}

void Model::backward_units(std::size_t i, const Tensor& input, const Tensor& grad_logits,
                           WorkerPool& pool, const DenseLayer*& pending) {
  const TraceSpan span(trace_, trace_ ? backward_names_[i] : std::string_view(), "compute");
  DenseLayer& dense = *dense_[i];
  const ActivationLayer* activation = grouped_activation_[i];
  const std::size_t top = activation != nullptr ? i + 1 : i;  // the group's last layer
  const Tensor& in = i == 0 ? input : outputs_[i - 1];
  const DenseLayer* above = pending;
  const Shape& shape = outputs_[i].shape();
  if (above != nullptr) grads_[top].resize(shape);
  if (activation != nullptr) grads_[i].resize(shape);
  const Tensor& group_grad = top + 1 == layers_.size() ? grad_logits : grads_[top];
  const Tensor& dense_grad = activation != nullptr ? grads_[i] : group_grad;
  const bool input_grad = i != first_trainable_;
  // Each worker reads and writes only its own units' columns of the gradients above the layer's
  // input, so the run needs no barrier inside.
  pool.run([&](int worker) {
    const auto [first, last] = dense.units_of(worker);
    if (above != nullptr) above->add_unit_input_grads(grads_[top], first, last);
    if (activation != nullptr)
      activation->backward_columns(outputs_[i], outputs_[i + 1], group_grad, grads_[i], first,
                                   last);
    dense.backward_units(in, dense_grad, worker, input_grad);
  });
  pending = nullptr;
  if (!input_grad) return;
  if (dense_[i - 1] != nullptr || grouped_with_dense(i - 1)) {
    pending = &dense;  // the group below sums the parts
    return;
  }
  grads_[i - 1].resize(in.shape());
  pool.run([&](int worker) {
    const auto [first, last] = worker_share(in.dim(1), pool.size(), worker);
    dense.add_unit_input_grads(grads_[i - 1], first, last);
  });
}

}  // namespace strata
