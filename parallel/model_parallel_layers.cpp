#include "parallel/model_parallel_layers.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/gemm.hpp"
#include "core/init.hpp"

namespace strata {

namespace {

// Copies rows [first, first+count) of a row-major [rows, width] tensor into `to`.
void copy_rows(const Tensor& from, std::int64_t width, std::int64_t first, std::int64_t count,
               Tensor& to) {
  std::copy(from.data() + first * width, from.data() + (first + count) * width, to.data());
}

// Gathers every shard's [batch, part] block over `model` into out [batch, shards*part], where shard
// m fills columns [m*part, (m+1)*part): the layout the unsplit layer would have produced.
void gather_columns(const Communicator& model, const Tensor& local, std::int64_t batch,
                    std::int64_t part, Tensor& staging, Tensor& out) {
  const std::int64_t shards = model.size();
  staging.resize({shards, batch, part});
  model.allgather(local.values(), staging.values());
  for (std::int64_t m = 0; m < shards; ++m)
    for (std::int64_t b = 0; b < batch; ++b)
      std::copy(staging.data() + (m * batch + b) * part,
                staging.data() + (m * batch + b + 1) * part, out.data() + (b * shards + m) * part);
}

// The inverse view: this shard's columns of a [batch, shards*part] gradient.
void slice_columns(const Tensor& whole, std::int64_t batch, std::int64_t part, std::int64_t shard,
                   std::int64_t shards, Tensor& local) {
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(whole.data() + (b * shards + shard) * part,
              whole.data() + (b * shards + shard + 1) * part, local.data() + b * part);
}

// Row blocks of every shard, stacked in shard order: the whole tensor of a row split.
Tensor gather_rows(const Communicator& model, const Tensor& local, Shape whole_shape) {
  Tensor whole(std::move(whole_shape));
  model.allgather(local.values(), whole.values());
  return whole;
}

// This shard's slice of each whole parameter: rows [first, first + extent) of axis `axis`.
std::vector<Param> as_slices(std::vector<Param> params, const std::vector<Shape>& whole, int axis,
                             std::int64_t first_fraction_num, std::int64_t shards) {
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Shape& w = whole[k];
    if (static_cast<std::size_t>(axis) >= w.size()) continue;  // a whole (replicated) tensor
    const std::int64_t part = w[static_cast<std::size_t>(axis)] / shards;
    params[k].shard = ShardSpec{w, axis, part * first_fraction_num};
  }
  return params;
}

}  // namespace

// ---- column-parallel dense ----

ColumnParallelDense::ColumnParallelDense(const std::string& name, std::int64_t units, InitKind init,
                                         const Communicator& model, bool gather_output)
    : Layer(name),
      units_(units),
      init_(init),
      model_(model),
      gather_output_(gather_output),
      local_(name, units / model.size(), init) {}

Shape ColumnParallelDense::build(const Shape& input_shape) {
  local_.build(input_shape);
  inputs_ = input_shape.at(0);
  return {gather_output_ ? units_ : units_ / model_.size()};
}

void ColumnParallelDense::initialize(Rng& rng) {
  // Draw the whole layer exactly as the unsplit model would, then keep this shard's rows.
  DenseLayer whole(name(), units_, init_);
  whole.build({inputs_});
  whole.initialize(rng);
  const std::int64_t part = units_ / model_.size(), first = part * model_.rank();
  auto mine = local_.params(), all = whole.params();
  copy_rows(*all[0].value, inputs_, first, part, *mine[0].value);
  copy_rows(*all[1].value, 1, first, part, *mine[1].value);
}

void ColumnParallelDense::forward(const Tensor& in, Tensor& out, bool training) {
  if (!gather_output_) {
    local_.forward(in, out, training);
    return;
  }
  local_.forward(in, local_out_, training);
  out.resize({in.dim(0), units_});
  gather_columns(model_, local_out_, in.dim(0), units_ / model_.size(), gathered_, out);
}

void ColumnParallelDense::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                                   Tensor* grad_in) {
  const Tensor* local_grad = &grad_out;
  if (gather_output_) {
    local_grad_.resize({in.dim(0), units_ / model_.size()});
    slice_columns(grad_out, in.dim(0), units_ / model_.size(), model_.rank(), model_.size(),
                  local_grad_);
    local_grad = &local_grad_;
  }
  local_.backward(in, gather_output_ ? local_out_ : out, *local_grad, grad_in);
  // Each shard's outputs depend on the whole input: the input gradient is the sum over shards.
  if (grad_in != nullptr) model_.allreduce_sum(*grad_in);
}

std::vector<Tensor> ColumnParallelDense::full_params() {
  auto mine = local_.params();
  return {gather_rows(model_, *mine[0].value, {units_, inputs_}),
          gather_rows(model_, *mine[1].value, {units_})};
}

std::vector<Param> ColumnParallelDense::params() {
  return as_slices(local_.params(), {{units_, inputs_}, {units_}}, 0, model_.rank(), model_.size());
}

// ---- row-parallel dense ----

RowParallelDense::RowParallelDense(std::string name, std::int64_t units, InitKind init,
                                   const Communicator& model)
    : Layer(std::move(name)), units_(units), init_(init), model_(model) {}

Shape RowParallelDense::build(const Shape& input_shape) {
  local_inputs_ = input_shape.at(0);
  weight_ = Tensor({units_, local_inputs_});
  weight_grad_ = Tensor(weight_.shape());
  bias_ = Tensor({units_});
  bias_grad_ = Tensor({units_});
  return {units_};
}

void RowParallelDense::initialize(Rng& rng) {
  const std::int64_t inputs = local_inputs_ * model_.size(), first = local_inputs_ * model_.rank();
  DenseLayer whole(name(), units_, init_);
  whole.build({inputs});
  whole.initialize(rng);
  const auto all = whole.params();
  for (std::int64_t o = 0; o < units_; ++o)
    std::copy(all[0].value->data() + o * inputs + first,
              all[0].value->data() + o * inputs + first + local_inputs_,
              weight_.data() + o * local_inputs_);
  std::copy(all[1].value->values().begin(), all[1].value->values().end(), bias_.values().begin());
}

void RowParallelDense::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  const auto batch = static_cast<int>(in.dim(0));
  const auto n_in = static_cast<int>(local_inputs_), n_out = static_cast<int>(units_);
  out.resize({batch, units_});
  sgemm(Transpose::no, Transpose::yes, batch, n_out, n_in, 1.0f, in.data(), n_in, weight_.data(),
        n_in, 0.0f, out.data(), n_out);
  model_.allreduce_sum(out);
  // The bias is added once, after the reduce, not once per shard.
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < n_out; ++o) out[b * n_out + o] += bias_[o];
}

void RowParallelDense::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                                Tensor* grad_in) {
  if (grad_in != nullptr) grad_in->resize(in.shape());
  dense_backward(
      static_cast<int>(in.dim(0)), static_cast<int>(local_inputs_), static_cast<int>(units_),
      in.data(), weight_.data(), {grad_out.data(), static_cast<int>(units_)},
      {weight_grad_.data(), bias_grad_.data(), grad_in != nullptr ? grad_in->data() : nullptr},
      gemm_padding_);
}

std::vector<Param> RowParallelDense::params() {
  // The bias is added once, after the reduce: every shard holds it whole.
  return as_slices(
      {{name() + "/weight", &weight_, &weight_grad_}, {name() + "/bias", &bias_, &bias_grad_}},
      {{units_, local_inputs_ * model_.size()}, {}}, 1, model_.rank(), model_.size());
}

std::vector<Tensor> RowParallelDense::full_params() {
  Tensor weight({units_, local_inputs_ * model_.size()}), staging;
  gather_columns(model_, weight_, units_, local_inputs_, staging, weight);
  return {std::move(weight), bias_};
}

// ---- conv split by output channel ----

ChannelSplitConv2D::ChannelSplitConv2D(const LayerSpec& spec, const Communicator& model)
    : Layer(spec.name),
      spec_(spec),
      model_(model),
      local_(spec.name, spec.filters / model.size(), spec.kernel, spec.stride, spec.padding,
             spec.init) {}

Shape ChannelSplitConv2D::build(const Shape& input_shape) {
  input_shape_ = input_shape;
  local_shape_ = local_.build(input_shape);
  return {spec_.filters, local_shape_[1], local_shape_[2]};
}

void ChannelSplitConv2D::initialize(Rng& rng) {
  Conv2DLayer whole(name(), spec_.filters, spec_.kernel, spec_.stride, spec_.padding, spec_.init);
  whole.build(input_shape_);
  whole.initialize(rng);
  const std::int64_t part = spec_.filters / model_.size(), first = part * model_.rank();
  const std::int64_t per_filter = input_shape_[0] * spec_.kernel * spec_.kernel;
  auto mine = local_.params(), all = whole.params();
  copy_rows(*all[0].value, per_filter, first, part, *mine[0].value);
  copy_rows(*all[1].value, 1, first, part, *mine[1].value);
}

std::vector<Param> ChannelSplitConv2D::params() {
  const Shape weight{spec_.filters, input_shape_.at(0), spec_.kernel, spec_.kernel};
  return as_slices(local_.params(), {weight, {spec_.filters}}, 0, model_.rank(), model_.size());
}

void ChannelSplitConv2D::forward(const Tensor& in, Tensor& out, bool training) {
  local_.forward(in, local_out_, training);
  convert_layout(local_out_, local_plain_, Layout::plain);
  const std::int64_t batch = in.dim(0), plane = local_shape_[1] * local_shape_[2];
  out.resize({batch, spec_.filters, local_shape_[1], local_shape_[2]});
  // Per sample, shard m's channels are one block of part*plane floats: gather them as columns.
  gather_columns(model_, local_plain_, batch, local_shape_[0] * plane, gathered_, out);
}

void ChannelSplitConv2D::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                                  Tensor* grad_in) {
  const std::int64_t batch = in.dim(0), part = local_shape_[0] * local_shape_[1] * local_shape_[2];
  local_grad_plain_.resize(local_plain_.shape());
  slice_columns(grad_out, batch, part, model_.rank(), model_.size(), local_grad_plain_);
  convert_layout(local_grad_plain_, local_grad_, local_out_.layout());
  local_.backward(in, local_out_, local_grad_, grad_in);
  if (grad_in != nullptr) model_.allreduce_sum(*grad_in);
}

std::vector<Tensor> ChannelSplitConv2D::full_params() {
  auto mine = local_.params();
  return {gather_rows(model_, *mine[0].value,
                      {spec_.filters, input_shape_[0], spec_.kernel, spec_.kernel}),
          gather_rows(model_, *mine[1].value, {spec_.filters})};
}

std::vector<std::pair<std::string, Tensor>> gather_full_weights(Model& model) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (std::size_t i = 0; i < model.layer_count(); ++i) {
    Layer& layer = model.layer(i);
    const auto params = layer.params();
    std::vector<Tensor> whole;
    if (auto* column = dynamic_cast<ColumnParallelDense*>(&layer))
      whole = column->full_params();
    else if (auto* row = dynamic_cast<RowParallelDense*>(&layer))
      whole = row->full_params();
    else if (auto* conv = dynamic_cast<ChannelSplitConv2D*>(&layer))
      whole = conv->full_params();
    else
      for (const auto& p : params) whole.push_back(*p.value);
    for (std::size_t k = 0; k < params.size(); ++k)
      named.emplace_back(params[k].name, std::move(whole[k]));
  }
  return named;
}

// ---- factory ----

namespace {

// The next layer with parameters after `index`, or null.
const LayerSpec* next_trainable(const std::vector<LayerSpec>& specs, std::size_t index) {
  for (std::size_t j = index + 1; j < specs.size(); ++j)
    if (specs[j].kind == LayerKind::dense || specs[j].kind == LayerKind::conv2d) return &specs[j];
  return nullptr;
}

}  // namespace

bool column_split_gathers_output(const std::vector<LayerSpec>& specs, std::size_t index) {
  if (specs[index].kind == LayerKind::conv2d) return true;
  const LayerSpec* next = next_trainable(specs, index);
  return next == nullptr || next->kind != LayerKind::dense || next->split != SplitKind::row;
}

LayerFactory model_parallel_factory(const Communicator& model, const std::string& config_file) {
  return [&model, config_file](const std::vector<LayerSpec>& specs,
                               std::size_t i) -> std::unique_ptr<Layer> {
    const LayerSpec& s = specs[i];
    if (model.size() < 2 || s.split == SplitKind::none) return nullptr;
    const std::int64_t size = s.kind == LayerKind::conv2d ? s.filters : s.units;
    if (s.split == SplitKind::column && size % model.size() != 0)
      throw ConfigError(fmt::format(
          "{}:{}:{}: model.layers[{}] ({}): {} {} cannot be split evenly over M = {} shards",
          config_file, s.mark.line, s.mark.column, i, s.name, size,
          s.kind == LayerKind::conv2d ? "filters" : "units", model.size()));
    if (s.kind == LayerKind::conv2d) return std::make_unique<ChannelSplitConv2D>(s, model);
    if (s.split == SplitKind::row)
      return std::make_unique<RowParallelDense>(s.name, s.units, s.init, model);
    return std::make_unique<ColumnParallelDense>(s.name, s.units, s.init, model,
                                                 column_split_gathers_output(specs, i));
  };
}

}  // namespace strata
