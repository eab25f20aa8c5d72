// Megatron-style model-parallel layers: each of the M ranks of a `model` communicator holds one
// shard.
#pragma once

#include <memory>
#include <string>

#include "core/config.hpp"
#include "core/conv2d_layer.hpp"
#include "core/dense_layer.hpp"
#include "core/gemm.hpp"
#include "core/model.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// Dense split by output: shard m holds rows [m*U/M, (m+1)*U/M) of W [U, I] and of the bias.
// Forward is a local GEMM; backward sums the shards' input gradients over `model`. When the next
// layer is row-split the output stays partitioned ([B, U/M]); otherwise it is gathered to [B, U].
class ColumnParallelDense final : public Layer {
 public:
  ColumnParallelDense(const std::string& name, std::int64_t units, InitKind init,
                      const Communicator& model, bool gather_output);
  const char* kind() const override { return "dense/column"; }
  Shape build(const Shape& input_shape) override;
  void initialize(Rng& rng) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<Param> params() override;
  // The unsplit weight and bias, assembled from every shard. Collective over `model`.
  std::vector<Tensor> full_params();

 private:
  std::int64_t units_, inputs_ = 0;
  InitKind init_;
  const Communicator& model_;
  bool gather_output_;
  DenseLayer local_;
  Tensor local_out_, gathered_, local_grad_;
};

// Dense split by input: shard m holds columns [m*I/M, (m+1)*I/M) of W [U, I] and reads the
// column-split layer's partitioned output. Forward sums the partial products over `model`, then
// adds the (whole, replicated) bias once; backward needs no communication.
class RowParallelDense final : public Layer {
 public:
  RowParallelDense(std::string name, std::int64_t units, InitKind init, const Communicator& model);
  const char* kind() const override { return "dense/row"; }
  Shape build(const Shape& input_shape) override;
  void initialize(Rng& rng) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<Param> params() override;
  std::vector<Tensor> full_params();  // collective over `model`

 private:
  std::int64_t units_, local_inputs_ = 0;
  InitKind init_;
  const Communicator& model_;
  Tensor weight_, bias_, weight_grad_, bias_grad_;
  GemmRowPadding gemm_padding_;  // for the gradient products
};

// Conv2D split by output channel: shard m holds filters [m*F/M, (m+1)*F/M). The output is gathered
// to all F channels (plain layout); backward sums the shards' input gradients over `model`.
class ChannelSplitConv2D final : public Layer {
 public:
  ChannelSplitConv2D(const LayerSpec& spec, const Communicator& model);
  const char* kind() const override { return "conv2d/column"; }
  Shape build(const Shape& input_shape) override;
  void initialize(Rng& rng) override;
  void forward(const Tensor& in, Tensor& out, bool training) override;
  void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                Tensor* grad_in) override;
  std::vector<Param> params() override;
  std::vector<Tensor> full_params();  // collective over `model`

 private:
  LayerSpec spec_;
  const Communicator& model_;
  Conv2DLayer local_;
  Shape input_shape_, local_shape_;
  Tensor local_out_, local_plain_, gathered_, local_grad_plain_, local_grad_;
};

// Every parameter of `model` under its name, whole: split layers assemble theirs from all shards.
// Collective over the split layers' `model` communicator: every shard must call it.
std::vector<std::pair<std::string, Tensor>> gather_full_weights(Model& model);

// Whether the column-split layer specs[index] gathers its output to every shard: a channel-split
// conv always does; a dense one unless the next layer that learns is its row-split partner.
bool column_split_gathers_output(const std::vector<LayerSpec>& specs, std::size_t index);

// Makes the model-parallel layer for every spec with a split, on a `model` communicator of M > 1
// ranks; null otherwise. Sizes that M does not divide are ConfigErrors naming `config_file` and the
// layer: every rank checks the same specs, so all fail alike before any collective.
LayerFactory model_parallel_factory(const Communicator& model, const std::string& config_file);

}  // namespace strata
