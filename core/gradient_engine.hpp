// Where a training's forward and backward passes run when not on this process's CPU worker
// threads (a GPU: cuda/DeviceModel), evaluation's forward passes included. The engine writes the
// gradients of the host model's parameters into their gradient tensors, so that the optimizer
// step and the checkpoints stay on the host, as in a CPU run; the gradient sums over replicas too,
// unless the engine makes them itself (sums_over_replicas).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/optimizer.hpp"
#include "core/tensor.hpp"

namespace strata {

// An engine's parameters and optimizer moments on their way to host memory (start_state_copy),
// as they were when the copy started.
class StateCopy {
 public:
  virtual ~StateCopy() = default;
  // Returns once every value has arrived. Any one thread may call it, once, before values_of.
  virtual void wait() = 0;
  // The copied values of the host tensor that download_state would fill: a parameter's value or
  // one of the optimizer's moment tensors. std::invalid_argument for any other tensor.
  virtual std::span<const float> values_of(const Tensor* host) const = 0;
};

class GradientEngine {
 public:
  struct Result {
    double loss_sum = 0.0;  // over the batch's samples
    std::int64_t correct = 0;
  };
  virtual ~GradientEngine() = default;
  // Copies the host model's parameters in first (they change with every optimizer step and
  // every loaded checkpoint), then the batch's forward and backward pass; the host gradients are
  // the summed loss's divided by `grad_divisor`. `step` and `first_sample` place dropout's noise.
  virtual Result gradients(const Tensor& images, std::span<const std::int32_t> labels,
                           double grad_divisor, std::uint64_t step, std::uint64_t first_sample) = 0;
  // Copies the host model's parameters in, for the logits() calls that follow (an evaluation).
  virtual void load_parameters() = 0;
  // The logits of `images` without dropout, valid until the next call.
  virtual const Tensor& logits(const Tensor& images) = 0;
  // Where it runs, for the log: "GPU 0 (NVIDIA H100 80GB HBM3)".
  virtual std::string where() const = 0;
  // Whether gradients() returns the gradients already summed over the data-parallel replicas
  // (over NCCL, on the device), so that the trainer's GradientSync must not sum them again.
  virtual bool sums_over_replicas() const { return false; }

  // Whether the engine can take whole optimizer steps (train_step), so that the parameters and
  // the optimizer's state stay on it between steps. The trainer then copies them in
  // (upload_state) after the host's copy changed, and out (download_state) before the host's copy
  // is read: the host keeps the state that checkpoints save. The defaults throw std::logic_error.
  virtual bool steps_on_device() const { return false; }
  // Micro-batch `index` of the `count` of one step (accumulate: K): its forward and backward
  // pass, its gradients added to those of the step's earlier micro-batches (index 0 starts the
  // sum), and after the last one the sums over replicas when sums_over_replicas(). The gradients
  // stay on the engine for apply_step.
  virtual Result add_micro_batch(const Tensor& images, std::span<const std::int32_t> labels,
                                 double grad_divisor, std::uint64_t step,
                                 std::uint64_t first_sample, int index, int count);
  // The optimizer's step on the summed gradients at rate `lr` times each parameter's lr_scale,
  // with the state uploaded last.
  virtual void apply_step(double lr);
  // A step of one micro-batch: add_micro_batch(..., 0, 1), then apply_step(lr).
  Result train_step(const Tensor& images, std::span<const std::int32_t> labels, double grad_divisor,
                    double lr, std::uint64_t step, std::uint64_t first_sample);
  // `params`: the host model's trainable parameters in the optimizer's order; `optimizer`: the
  // host optimizer, whose moments and step count travel with them. Every parameter's value goes,
  // frozen ones included.
  virtual void upload_state(const std::vector<Param>& params, Optimizer& optimizer);
  virtual void download_state(const std::vector<Param>& params, Optimizer& optimizer);
  // What download_state copies, started towards the engine's own host buffers without waiting,
  // so that the steps that follow overlap the copy (a checkpoint's); the optimizer's step count
  // is set at once. Null (the default) where the engine has no such copy: the caller downloads.
  virtual std::unique_ptr<StateCopy> start_state_copy(const std::vector<Param>& /*params*/,
                                                      Optimizer& /*optimizer*/) {
    return nullptr;
  }
};

}  // namespace strata
