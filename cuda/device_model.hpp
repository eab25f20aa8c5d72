// A model's layers on one GPU, for training: built from the same layer specs as a host Model (a
// conv followed by a relu fused, as the Model fuses them; a model-parallel layer as this rank's
// shard of it, its collectives over the shards on NCCL) and bound to that Model's parameters,
// which it copies in and out, so that checkpoints, evaluation on the host and the rest of strata
// keep reading the host Model. A step runs forward, softmax cross-entropy, backward and the
// optimizer's update on the device, one layer after the other, with cuDNN, cuBLAS and the kernels
// of cuda_kernels.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/config.hpp"
#include "core/gradient_engine.hpp"
#include "core/model.hpp"
#include "cuda/conv_cudnn.hpp"
#include "cuda/dense_gemm.hpp"
#include "cuda/device_memory.hpp"

namespace strata::cuda {

// What a device model runs on: a stream, its allocator and the library handles bound to it, and
// a stream for copies that overlap it.
struct DeviceContext {
  explicit DeviceContext(int device) : allocator(device), blas(stream.get()), cudnn(stream.get()) {}
  Stream stream, copies;
  DeviceAllocator allocator;
  BlasHandle blas;
  CudnnHandle cudnn;
};

// A parameter's gradient on the device.
struct DeviceGradient {
  float* values = nullptr;
  std::size_t count = 0;
};

// Sums a DeviceModel's gradients over the data-parallel replicas (cuda/replica_sum.hpp does it
// with NCCL). Backward hands it each layer's gradients as soon as they are enqueued on the compute
// stream, so that the sums of late layers overlap the backward pass of early ones; finish() comes
// before anything reads them.
class ReplicaGradientSum {
 public:
  virtual ~ReplicaGradientSum() = default;
  virtual void layer_ready(std::span<const DeviceGradient> grads, const Stream& compute) = 0;
  // Returns when every sum is complete; work enqueued on `compute` afterwards sees the sums.
  virtual void finish(const Stream& compute) = 0;
};

// The collectives of the model-parallel layers over the M shards of one replica, each enqueued on
// the compute stream, where the next layer waits for it (cuda/model_shards.hpp does them with
// NCCL). Every shard calls them in the same order: its layers' forward, then their backward.
class ShardCollectives {
 public:
  virtual ~ShardCollectives() = default;
  virtual int shard() const = 0;
  virtual int shards() const = 0;
  // Sums `count` floats over the shards, in place.
  virtual void sum(float* values, std::size_t count, const Stream& compute) = 0;
  // Shard r's `count` floats of `mine` land in all[r * count, (r + 1) * count).
  virtual void allgather(const float* mine, float* all, std::size_t count,
                         const Stream& compute) = 0;
  // Returns when `compute` has done its work; a collective that stalls is reported and ended as
  // the watchdog says (CudaError), where a plain synchronize would wait for ever.
  virtual void wait(const Stream& compute) = 0;
};

class DeviceModel final : public GradientEngine {
 public:
  // `host` was built from `specs`, with model_parallel_factory when `shards` is given (M > 1) and
  // without a layer factory otherwise; they, `context` and `shards` must outlive this object.
  // Throws std::invalid_argument for a layer the device cannot run. Copies the host parameters
  // (a shard's slices, for a split layer) to the device.
  DeviceModel(Model& host, const std::vector<LayerSpec>& specs, const OptimizerSpec& optimizer,
              DeviceContext& context, ShardCollectives* shards = nullptr);
  ~DeviceModel() override;
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  // Host parameters to the device (after the host Model loaded a checkpoint), and back (before
  // the host Model is saved or evaluated).
  void upload_parameters();
  void download_parameters();

  // Micro-batch `index` of `count` in one optimizer step, on `images` ([batch, C, H, W] or
  // [batch, features], plain layout) and `labels`: gradients are the batch's summed loss divided
  // by `grad_divisor` (the global batch), as Trainer's, added on the device to the step's earlier
  // micro-batches'. `step` and `first_sample` place dropout's noise as on the CPU. With one
  // micro-batch the sums over replicas overlap backward; with more they run once, after the last.
  Result add_micro_batch(const Tensor& images, std::span<const std::int32_t> labels,
                         double grad_divisor, std::uint64_t step, std::uint64_t first_sample,
                         int index, int count) override;
  // The optimizer's update on the device from the summed gradients.
  void apply_step(double lr) override;
  bool steps_on_device() const override { return true; }
  // The host's parameter values (all), optimizer moments and step count to the device, and back
  // (GradientEngine's contract). The optimizer must be of the kind this model was made with.
  void upload_state(const std::vector<Param>& params, Optimizer& optimizer) override;
  void download_state(const std::vector<Param>& params, Optimizer& optimizer) override;
  // The parameters and moments to page-locked host buffers on the copy stream, after the steps
  // enqueued so far: the next steps' forward and backward passes overlap the copy, and the next
  // update waits for it. The buffers are reused by the next copy once this one is released.
  std::unique_ptr<StateCopy> start_state_copy(const std::vector<Param>& params,
                                              Optimizer& optimizer) override;

  // GradientEngine, for the host Trainer: the host parameters in, forward and backward on the
  // device, the gradients out into the host parameters' gradient tensors.
  Result gradients(const Tensor& images, std::span<const std::int32_t> labels, double grad_divisor,
                   std::uint64_t step, std::uint64_t first_sample) override;
  void load_parameters() override { upload_parameters(); }
  // The logits [batch, classes] of `images` with the device's parameters, without dropout.
  const Tensor& logits(const Tensor& images) override;
  std::string where() const override;

  std::int64_t steps_taken() const { return steps_; }

  // From now on every step's gradients are summed over the replicas by `sum` (which must outlive
  // this object, or be unset with nullptr) before gradients() returns them or apply_step() applies
  // them.
  void set_replica_sum(ReplicaGradientSum* sum) { replica_sum_ = sum; }

 private:
  struct Stage;
  struct Parameter {
    Param host;
    DeviceBuffer value, grad, first, second;  // first, second: momentum or Adam's moments
    DeviceBuffer step_sum;  // accumulate: K > 1, the gradient of the step's micro-batches so far
  };
  const DeviceBuffer& forward(const Tensor& images, bool training, std::uint64_t step,
                              std::uint64_t first_sample);
  // Forward, loss and backward: every parameter's device gradient, summed over the replicas when
  // `sum_in_backward` (each layer's handed to the replica sum as backward finishes it, or, for a
  // split model, all once backward is done). Returns the logits.
  const DeviceBuffer& forward_backward(const Tensor& images, std::span<const std::int32_t> labels,
                                       double grad_divisor, std::uint64_t step,
                                       std::uint64_t first_sample, bool sum_in_backward = true);
  // A trainable layer's weight and bias gradients to the replica sum, if there is one.
  void hand_to_replica_sum(const Parameter& w, const Parameter& b);
  // Every trainable layer's gradients to the replica sum, last layer first as backward hands
  // them, and the wait for the sums.
  void sum_over_replicas_now();
  // The split layers' work between forward and backward of the neighbouring layers.
  void split_forward(Stage& st, const float* in, float* out, std::int64_t batch);
  void split_backward(Stage& st, const float* in, const float* grad_out, float* grad_in,
                      std::int64_t batch);
  // Returns when the compute stream is done, under the shards' watch when there are shards.
  void wait_for_compute();
  // The batch's summed loss and correct predictions (waits for the stream).
  Result batch_result(const DeviceBuffer& logits, std::span<const std::int32_t> labels);
  // The optimizer's buffers on the device, made (zero) where missing.
  void ensure_moments();
  // Throws std::invalid_argument unless the host optimizer's `moments` are of this model's kind.
  void check_moments(std::size_t moments) const;
  // Nothing enqueued on the compute stream from now on runs before a state copy in flight is
  // done: what writes the parameters or moments calls it first.
  void wait_for_state_copy();
  // The device parameter bound to the host tensor `value`; throws std::invalid_argument if none.
  Parameter& bound_to(const Tensor* value);

  DeviceContext& context_;
  OptimizerSpec optimizer_;
  ShardCollectives* shards_ = nullptr;
  ReplicaGradientSum* replica_sum_ = nullptr;
  std::vector<Stage> stages_;
  std::vector<Parameter> params_;
  std::shared_ptr<std::vector<std::unique_ptr<PinnedFloats>>> pinned_;  // the last state copy's
  Event copy_start_, copy_end_;
  bool state_copy_pending_ = false;
  std::vector<DeviceBuffer> outputs_, grads_;
  DeviceBuffer input_, labels_, row_loss_, grad_logits_;
  std::vector<float> label_bits_;  // the labels as uploaded: alive until the stream has read them
  Tensor host_logits_;             // what logits() returns
  std::int64_t batch_ = 0, steps_ = 0;
};

// A DeviceModel with the context it runs on, as one GradientEngine: what a host Trainer takes.
class GpuGradients final : public GradientEngine {
 public:
  // `device` must be current (bind_rank_to_device); `host`, `specs` and `shards` (null when the
  // model is not split) as for DeviceModel.
  GpuGradients(Model& host, const std::vector<LayerSpec>& specs, const OptimizerSpec& optimizer,
               int device, std::unique_ptr<ShardCollectives> shards = nullptr)
      : context_(device),
        shards_(std::move(shards)),
        model_(host, specs, optimizer, context_, shards_.get()) {}
  Result gradients(const Tensor& images, std::span<const std::int32_t> labels, double grad_divisor,
                   std::uint64_t step, std::uint64_t first_sample) override {
    return model_.gradients(images, labels, grad_divisor, step, first_sample);
  }
  void load_parameters() override { model_.load_parameters(); }
  const Tensor& logits(const Tensor& images) override { return model_.logits(images); }
  std::string where() const override { return model_.where(); }
  int device() const { return context_.allocator.device(); }
  bool sums_over_replicas() const override { return replica_sum_ != nullptr; }
  bool steps_on_device() const override { return true; }
  Result add_micro_batch(const Tensor& images, std::span<const std::int32_t> labels,
                         double grad_divisor, std::uint64_t step, std::uint64_t first_sample,
                         int index, int count) override {
    return model_.add_micro_batch(images, labels, grad_divisor, step, first_sample, index, count);
  }
  void apply_step(double lr) override { model_.apply_step(lr); }
  void upload_state(const std::vector<Param>& params, Optimizer& optimizer) override {
    model_.upload_state(params, optimizer);
  }
  void download_state(const std::vector<Param>& params, Optimizer& optimizer) override {
    model_.download_state(params, optimizer);
  }
  std::unique_ptr<StateCopy> start_state_copy(const std::vector<Param>& params,
                                              Optimizer& optimizer) override {
    return model_.start_state_copy(params, optimizer);
  }

  // The gradients are summed over the replicas by `sum` from now on (see DeviceModel).
  void sum_over_replicas(std::unique_ptr<ReplicaGradientSum> sum) {
    replica_sum_ = std::move(sum);
    model_.set_replica_sum(replica_sum_.get());
  }

 private:
  DeviceContext context_;
  std::unique_ptr<ShardCollectives> shards_;
  DeviceModel model_;
  std::unique_ptr<ReplicaGradientSum> replica_sum_;
};

}  // namespace strata::cuda
