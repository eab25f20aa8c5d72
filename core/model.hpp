// A sequential model built from the YAML layer list: forward and backward through every layer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/layer.hpp"
#include "core/trace.hpp"

namespace strata {

class ActivationLayer;
class DenseLayer;
class WorkerPool;

// Makes the layer for specs[index] when a caller wants its own kind (model-parallel layers from
// parallel/), or returns null to take the built-in one.
using LayerFactory =
    std::function<std::unique_ptr<Layer>(const std::vector<LayerSpec>& specs, std::size_t index)>;

// How many bytes of a conv's output the max pooling after it reads back per slice in training
// (Model::forward_conv_and_pool), given a core's L2: 5/8 of it, so that the slice stays there
// beside the conv's own operands, and at most 640 KiB. On the benchmark CNN's first conv (74 KB a
// sample, one thread, 32-sample steps) slices for a 1 MiB L2 (640 KiB) ran its forward and
// pooling in 203-208 us a step against 217 in slices for a 512 KiB one (320 KiB); 900 KiB slices
// gained nothing more.
std::int64_t conv_pool_slice_bytes(std::int64_t l2_bytes);

class Model {
 public:
  // Builds the layers for per-sample `input_shape` ([C,H,W]) and draws initial weights from
  // `init_seed`. Throws ConfigError naming `config_file`, the layer's line and column, and the
  // shape problem; the last layer must produce `num_classes` logits.
  Model(const std::vector<LayerSpec>& specs, const Shape& input_shape, int num_classes,
        std::uint64_t init_seed, const std::string& config_file = "",
        const LayerFactory& factory = {});
  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;
  ~Model();

  // Returns the logits [batch, classes]; valid until the next forward. With `unit_split` (for a
  // model that can_split_units(), called from no task of that pool: the caller becomes its worker
  // 0), the pool's workers split every dense layer's units between them, with the activation
  // after it; the other layers run on the calling thread.
  const Tensor& forward(const Tensor& input, bool training, WorkerPool* unit_split = nullptr);
  // Back-propagates d(loss)/d(logits) through the last forward's activations and writes every
  // parameter gradient. `input` must be the tensor the last forward saw, in training.
  // `on_layer_done`, when set, is called once for every layer from the last down to the first
  // trainable one, as soon as its gradients are final and after the pass's last read of its
  // weights, so that their reduction or step can overlap the rest of the backward pass. `unit_split` as
  // in forward, which must have had the same pool.
  void backward(const Tensor& input, const Tensor& grad_logits,
                const std::function<void(std::size_t layer)>& on_layer_done = {},
                WorkerPool* unit_split = nullptr);
  // Whether every layer with parameters is a dense one, whose units a WorkerPool can split.
  bool can_split_units() const;
  // The inputs of a sample to all the dense layers together.
  std::int64_t dense_input_width() const;
  // The first layer with parameters that is not a dense one; empty when none.
  std::string first_non_dense_name() const;

  // Gives every noisy layer (dropout) its own stream derived from `seed`.
  void reseed_noise(std::uint64_t seed);
  // Tells noisy layers which samples the next training forward pass sees
  // (Layer::set_noise_position).
  void set_noise_position(std::uint64_t step, std::uint64_t first_sample);

  // Another model of the same layers (made by the same factory) with this one's parameters and
  // noise keys: a worker thread's replica.
  Model replicate();
  // Records each layer's forward and backward on `trace` (null: off).
  void set_trace(Trace* trace);

  // Every parameter as "<prefix>/<layer>/weight" (or bias), a shard as its slice of the whole
  // tensor, and the layers' other state (noise keys). load_state reads the same keys; a missing
  // key or a tensor of another shape throws DataError.
  void save_state(StateDict& out, const std::string& prefix);
  void load_state(const StateDict& in, const std::string& prefix);
  // The key save_state gives parameter `p` under `prefix`.
  static std::string state_key(const std::string& prefix, const Param& p) {
    return prefix + "/" + p.name;
  }

  std::vector<Param> params();
  // The parameters that learn (Param::trainable).
  std::vector<Param> trainable_params();
  // Layer i's parameters, marked trainable or not.
  std::vector<Param> params_of(std::size_t layer);
  // The named layers' parameters stop learning: params() marks them untrainable, and backward
  // stops before the first layer that still learns. Throws std::invalid_argument for a name that
  // is no layer.
  void freeze(const std::vector<std::string>& layer_names);
  // The named layers' parameters learn at `scale` times the schedule's rate (Param::lr_scale).
  // Throws std::invalid_argument for a name that is no layer.
  void scale_learning_rate(const std::vector<std::string>& layer_names, double scale);
  std::int64_t parameter_count();
  std::size_t layer_count() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_[i]; }
  const Shape& input_shape() const { return input_shape_; }
  // Layer i's per-sample output shape.
  const Shape& output_shape(std::size_t i) const { return output_shapes_[i]; }
  // The most floats of a sample among the layer outputs a training forward pass keeps for the
  // whole batch (not a conv's that runs a few samples at a time with its pooling); at least 1.
  std::int64_t largest_kept_output() const;
  int num_classes() const { return num_classes_; }
  // One line per layer: name, kind, output shape, parameter count.
  std::string summary();

 private:
  void backward_from_max_pool(std::size_t pool, const Tensor& input, const Tensor& pooled_grad);
  // False where it ran neither layer: an evaluation pass that the fused kernel does not run.
  bool forward_conv_and_pool(std::size_t conv, const Tensor& in, bool training);
  // Layer i is a conv that forward_conv_and_pool runs with the max pooling after it.
  bool runs_with_pooling(std::size_t i) const { return convs_with_pooling_.contains(i); }
  // What replicate() builds from.
  std::vector<LayerSpec> specs_;
  int num_classes_ = 0;
  std::string config_file_;
  LayerFactory factory_;
  Shape input_shape_;
  std::vector<Shape> output_shapes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  // outputs_[i]: output of layer i; of a conv that forward_conv_and_pool ran, its last slice's (or
  // nothing the fused kernel wrote).
  std::vector<Tensor> outputs_;
  Tensor slice_input_;                       // forward_conv_and_pool's copy of a slice's input
  std::int64_t conv_slice_bytes_ = 0;        // conv_pool_slice_bytes for this machine's L2
  std::vector<Tensor> grads_;                // grads_[i]: d(loss)/d(output of layer i)
  std::set<std::string> frozen_;             // names of layers whose parameters do not learn
  std::map<std::string, double> lr_scales_;  // layer name -> learning-rate multiple
  // Backward stops here: layers up to the first one with parameters need no input gradient,
  // because nothing before them learns.
  std::size_t first_trainable_ = 0;
  // The first trainable layer is a conv that takes its weight gradient from the max pooling after
  // it (Conv2DLayer::take_weight_gradient_from).
  bool first_conv_from_pooling_ = false;
  // Convs before a max pooling whose output nothing else reads: the first trainable layer's
  // (first_conv_from_pooling_) and any before it, which backward never reaches.
  std::set<std::size_t> convs_with_pooling_;
  Trace* trace_ = nullptr;
  // The unit split's pass through dense layer i and the activation grouped with it, if any, in
  // one run of the pool; returns the index of the group's last layer.
  std::size_t forward_units(std::size_t i, const Tensor& in, WorkerPool& pool);
  // The unit split's backward through dense layer i's group. `pending`: a dense layer above
  // whose input gradient is still in its workers' parts, which each worker sums here on its own
  // columns; on return this layer, when the group below will sum its parts the same way.
  void backward_units(std::size_t i, const Tensor& input, const Tensor& grad_logits,
                      WorkerPool& pool, const DenseLayer*& pending);
  // Layer i is an activation that runs on the columns of the dense layer before it in the unit
  // split, so that each worker's units stay in its own core's cache between the two.
  bool grouped_with_dense(std::size_t i) const {
    return i > 0 && grouped_activation_[i - 1] != nullptr;
  }
  // dense_[i]: layer i when it is a built-in dense layer, for the unit split; else null.
  std::vector<DenseLayer*> dense_;
  // grouped_activation_[i]: the activation after dense layer i (grouped_with_dense); else null.
  std::vector<ActivationLayer*> grouped_activation_;
  std::vector<std::string> forward_names_, backward_names_;  // "forward conv2d_1", for the trace
};

}  // namespace strata
