#include "core/model.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/activation_layers.hpp"
#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/dense_layer.hpp"
#include "core/errors.hpp"
#include "core/pool_layers.hpp"
#include "core/shape_layers.hpp"
#include "core/worker_pool.hpp"

namespace strata {

namespace {

std::unique_ptr<Layer> make_layer(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::dense:
      return std::make_unique<DenseLayer>(s.name, s.units, s.init);
    case LayerKind::conv2d:
      return std::make_unique<Conv2DLayer>(s.name, s.filters, s.kernel, s.stride, s.padding,
                                           s.init);
    case LayerKind::maxpool2d:
      return std::make_unique<Pool2DLayer>(s.name, Pool2DLayer::Mode::max, s.size, s.stride);
    case LayerKind::avgpool2d:
      return std::make_unique<Pool2DLayer>(s.name, Pool2DLayer::Mode::average, s.size, s.stride);
    case LayerKind::flatten:
      return std::make_unique<FlattenLayer>(s.name);
    case LayerKind::dropout:
      return std::make_unique<DropoutLayer>(s.name, s.rate);
    case LayerKind::relu:
    case LayerKind::tanh:
    case LayerKind::sigmoid:
    case LayerKind::leaky_relu:
      return std::make_unique<ActivationLayer>(s.name, s.kind, s.alpha);
  }
  throw std::logic_error("unhandled layer kind");
}

std::string where(const std::string& file, const LayerSpec& s, std::size_t index) {
  return fmt::format("{}:{}:{}: model.layers[{}] ({})", file.empty() ? "<model>" : file,
                     s.mark.line, s.mark.column, index, s.name);
}

}  // namespace

std::int64_t conv_pool_slice_bytes(std::int64_t l2_bytes) {
  return std::min(l2_bytes / 8 * 5, std::int64_t{640} << 10);
}

Model::Model(const std::vector<LayerSpec>& specs, const Shape& input_shape, int num_classes,
             std::uint64_t init_seed, const std::string& config_file, const LayerFactory& factory)
    : specs_(specs),
      num_classes_(num_classes),
      config_file_(config_file),
      factory_(factory),
      input_shape_(input_shape),
      conv_slice_bytes_(conv_pool_slice_bytes(l2_cache_bytes())) {
  if (specs.empty())
    throw ConfigError(fmt::format("{}: model.layers: the model has no layers", config_file));
  Rng rng(init_seed);
  Shape shape = input_shape;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::unique_ptr<Layer> layer = factory ? factory(specs, i) : nullptr;
    if (!layer) layer = make_layer(specs[i]);
    try {
      shape = layer->build(shape);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(fmt::format("{}: {}", where(config_file, specs[i], i), e.what()));
    }
    layer->initialize(rng);
    // conv -> relu runs as one oneDNN kernel; the relu spec adds nothing else to run.
    if (auto* conv = dynamic_cast<Conv2DLayer*>(layer.get());
        conv != nullptr && i + 1 < specs.size() && specs[i + 1].kind == LayerKind::relu) {
      conv->fuse_relu();
      ++i;
    }
    // conv+relu -> max pooling: the pooling's backward applies the ReLU's derivative at the one
    // element per window it writes, sparing the conv a masking pass over its whole output
    // gradient (memory-bound: about 10% of the CNN's step).
    if (auto* pool = dynamic_cast<Pool2DLayer*>(layer.get());
        pool != nullptr && specs[i].kind == LayerKind::maxpool2d && !layers_.empty())
      if (auto* conv = dynamic_cast<Conv2DLayer*>(layers_.back().get());
          conv != nullptr && conv->relu_fused()) {
        pool->apply_relu_derivative();
        conv->leave_relu_derivative_to_next();
      }
    output_shapes_.push_back(shape);
    layers_.push_back(std::move(layer));
  }
  if (shape.size() != 1 || shape[0] != num_classes)
    throw ConfigError(fmt::format(
        "{}: the last layer must output {} logits (one per class), but outputs {}",
        where(config_file, specs.back(), specs.size() - 1), num_classes, shape_string(shape)));
  outputs_.resize(layers_.size());
  grads_.resize(layers_.size());
  for (const auto& layer : layers_) dense_.push_back(dynamic_cast<DenseLayer*>(layer.get()));
  for (std::size_t i = 0; i < layers_.size(); ++i)
    grouped_activation_.push_back(dense_[i] != nullptr && i + 1 < layers_.size()
                                      ? dynamic_cast<ActivationLayer*>(layers_[i + 1].get())
                                      : nullptr);
  freeze({});
  reseed_noise(derive_seed(init_seed, {layers_.size()}));
}

Model::~Model() = default;

bool Model::can_split_units() const {
  const bool any_dense =
      std::any_of(dense_.begin(), dense_.end(), [](const DenseLayer* d) { return d != nullptr; });
  return any_dense && first_non_dense_name().empty();
}

std::int64_t Model::dense_input_width() const {
  std::int64_t width = 0;
  for (const DenseLayer* dense : dense_)
    if (dense != nullptr) width += dense->inputs();
  return width;
}

std::string Model::first_non_dense_name() const {
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (dense_[i] == nullptr && !layers_[i]->params().empty()) return layers_[i]->name();
  return {};
}

const Tensor& Model::forward(const Tensor& input, bool training, WorkerPool* unit_split) {
  const Tensor* in = &input;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (unit_split != nullptr && dense_[i] != nullptr) {
      i = forward_units(i, *in, *unit_split);
      in = &outputs_[i];
      continue;
    }
    if (runs_with_pooling(i) && forward_conv_and_pool(i, *in, training)) {
      in = &outputs_[++i];
      continue;
    }
    const TraceSpan span(trace_, trace_ ? forward_names_[i] : std::string_view(), "compute");
    layers_[i]->forward(*in, outputs_[i], training);
    in = &outputs_[i];
  }
  return outputs_.back();
}

// A conv that takes its weight gradient from the max pooling after it (freeze chose that) has no
// other reader of its output. Where the fused kernel runs the two (core/conv_relu_max_pool.hpp),
// that output is never written: its span is the conv's, and the pooling's forward has none.
// Elsewhere, in training, the two run a few samples at a time and the pooling reads each slice of
// the conv's output from the core's L2. Whole, a 32-sample chunk of the benchmark CNN's first conv
// writes 2.4 MB, which the pooling read back from L3 or memory.
bool Model::forward_conv_and_pool(std::size_t conv, const Tensor& in, bool training) {
  auto& pool = dynamic_cast<Pool2DLayer&>(*layers_[conv + 1]);
  const std::int64_t batch = in.dim(0);
  auto& conv_layer = dynamic_cast<Conv2DLayer&>(*layers_[conv]);
  if (const std::optional<Layout> layout = conv_layer.max_pooled_layout(batch, in.layout())) {
    const TraceSpan span(trace_, trace_ ? forward_names_[conv] : std::string_view(), "compute");
    const Pool2DLayer::Output out = pool.begin_output(outputs_[conv + 1], batch, *layout, training);
    conv_layer.forward_max_pooled(in, out.values, out.first_maxima);
    return true;
  }
  if (!training) return false;
  const auto sample_bytes =
      element_count(output_shapes_[conv]) * static_cast<std::int64_t>(sizeof(float));
  const std::int64_t slices = std::clamp<std::int64_t>(batch * sample_bytes / conv_slice_bytes_, 1,
                                                       std::max<std::int64_t>(batch, 1));
  const std::int64_t sample_size = batch > 0 ? in.size() / batch : 0;
  for (int s = 0; s < slices; ++s) {
    const auto [first, last] = worker_share(batch, static_cast<int>(slices), s);
    const Tensor* slice = &in;
    if (slices > 1) {
      Shape shape = in.shape();
      shape[0] = last - first;
      slice_input_.resize(shape, in.layout());
      std::copy(in.data() + first * sample_size, in.data() + last * sample_size,
                slice_input_.data());
      slice = &slice_input_;
    }
    {
      const TraceSpan span(trace_, trace_ ? forward_names_[conv] : std::string_view(), "compute");
      layers_[conv]->forward(*slice, outputs_[conv], true);
    }
    const TraceSpan span(trace_, trace_ ? forward_names_[conv + 1] : std::string_view(), "compute");
    pool.forward_slice(outputs_[conv], outputs_[conv + 1], first, batch, true);
  }
  return true;
}

std::int64_t Model::largest_kept_output() const {
  std::int64_t largest = 1;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (!runs_with_pooling(i)) largest = std::max(largest, element_count(output_shapes_[i]));
  return largest;
}

// Layer `pool` is the max pooling after the first trainable layer, a conv that takes its weight
// gradient from it (freeze chose that): the conv output's gradient, which nothing else needs, is
// never written.
void Model::backward_from_max_pool(std::size_t pool, const Tensor& input,
                                   const Tensor& pooled_grad) {
  auto& conv = dynamic_cast<Conv2DLayer&>(*layers_[pool - 1]);
  const auto& pooling = dynamic_cast<const Pool2DLayer&>(*layers_[pool]);
  if (pooled_grad.layout() != outputs_[pool].layout())
    throw std::logic_error(
        fmt::format("layer {}: its gradient is not in its output's layout", pooling.name()));
  const TraceSpan span(trace_, trace_ ? backward_names_[pool - 1] : std::string_view(), "compute");
  conv.backward_from_max_pool(pool == 1 ? input : outputs_[pool - 2], pooling.first_maxima(),
                              pooled_grad);
}

void Model::backward(const Tensor& input, const Tensor& grad_logits,
                     const std::function<void(std::size_t layer)>& on_layer_done,
                     WorkerPool* unit_split) {
  const DenseLayer* pending = nullptr;  // see backward_units
  for (std::size_t i = layers_.size(); i-- > first_trainable_;) {
    if (unit_split != nullptr && grouped_with_dense(i)) continue;  // its dense layer runs it
    if (unit_split != nullptr && dense_[i] != nullptr) {
      backward_units(i, input, grad_logits, *unit_split, pending);
      if (on_layer_done) on_layer_done(i);
      continue;
    }
    const Tensor& in = i == 0 ? input : outputs_[i - 1];
    const Tensor& grad_out = i + 1 == layers_.size() ? grad_logits : grads_[i];
    if (i == first_trainable_ + 1 && first_conv_from_pooling_) {
      backward_from_max_pool(i, input, grad_out);
      if (on_layer_done) {
        on_layer_done(i);
        on_layer_done(i - 1);
      }
      return;
    }
    Tensor* grad_in = i == first_trainable_ ? nullptr : &grads_[i - 1];
    const TraceSpan span(trace_, trace_ ? backward_names_[i] : std::string_view(), "compute");
    layers_[i]->backward(in, outputs_[i], grad_out, grad_in);
    if (on_layer_done) on_layer_done(i);
  }
}

void Model::set_trace(Trace* trace) {
  trace_ = trace;
  forward_names_.clear();
  backward_names_.clear();
  for (const auto& layer : layers_) {
    forward_names_.push_back("forward " + layer->name());
    backward_names_.push_back("backward " + layer->name());
  }
}

void Model::reseed_noise(std::uint64_t seed) {
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->reseed_noise(derive_seed(seed, {i}));
}

void Model::set_noise_position(std::uint64_t step, std::uint64_t first_sample) {
  for (auto& layer : layers_) layer->set_noise_position(step, first_sample);
}

void Model::freeze(const std::vector<std::string>& layer_names) {
  for (const auto& name : layer_names) {
    bool found = false;
    for (const auto& layer : layers_) found = found || layer->name() == name;
    if (!found)
      throw std::invalid_argument(fmt::format("freeze: the model has no layer '{}'", name));
    frozen_.insert(name);
  }
  // Backward needs no input gradient before the first layer that learns.
  first_trainable_ = 0;
  while (first_trainable_ + 1 < layers_.size() &&
         (layers_[first_trainable_]->params().empty() ||
          frozen_.contains(layers_[first_trainable_]->name())))
    ++first_trainable_;
  // Nothing needs the first trainable layer's input gradient: a conv there whose output a max
  // pooling reads takes its weight gradient from the pooling's (about 3 of every 4 of its output
  // gradients are zero, and none of them need be written).
  // A conv before that layer, which backward never reaches, runs with its max pooling too.
  first_conv_from_pooling_ = false;
  convs_with_pooling_.clear();
  for (auto& layer : layers_)
    if (auto* pool = dynamic_cast<Pool2DLayer*>(layer.get())) pool->record_first_maxima(false);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    auto* conv = dynamic_cast<Conv2DLayer*>(layers_[i].get());
    if (conv == nullptr) continue;
    std::optional<MaxPoolWindows> windows;
    auto* pool =
        i + 1 < layers_.size() ? dynamic_cast<Pool2DLayer*>(layers_[i + 1].get()) : nullptr;
    if (i <= first_trainable_ && pool != nullptr) windows = pool->max_windows();
    const bool gradient_from_pooling = i == first_trainable_ && windows.has_value();
    if (gradient_from_pooling) pool->record_first_maxima(true);
    conv->take_weight_gradient_from(gradient_from_pooling ? windows : std::nullopt);
    conv->set_max_pooling_after(windows);
    if (windows) convs_with_pooling_.insert(i);
    first_conv_from_pooling_ = first_conv_from_pooling_ || gradient_from_pooling;
  }
}

void Model::scale_learning_rate(const std::vector<std::string>& layer_names, double scale) {
  for (const auto& name : layer_names) {
    bool found = false;
    for (const auto& layer : layers_) found = found || layer->name() == name;
    if (!found)
      throw std::invalid_argument(fmt::format("lr_groups: the model has no layer '{}'", name));
    lr_scales_[name] = scale;
  }
}

std::vector<Param> Model::params_of(std::size_t layer) {
  auto params = layers_[layer]->params();
  const std::string& name = layers_[layer]->name();
  const auto scale = lr_scales_.find(name);
  for (auto& p : params) {
    p.trainable = !frozen_.contains(name);
    if (scale != lr_scales_.end()) p.lr_scale = scale->second;
  }
  return params;
}

Model Model::replicate() {
  Model copy(specs_, input_shape_, num_classes_, 0, config_file_, factory_);
  copy.freeze({frozen_.begin(), frozen_.end()});
  copy.lr_scales_ = lr_scales_;
  StateDict state;
  save_state(state, "model");
  copy.load_state(state, "model");
  return copy;
}

void Model::save_state(StateDict& out, const std::string& prefix) {
  for (const auto& p : params())
    out.put_tensor(state_key(prefix, p), p.value->values(), p.value->shape(), shard_of(p));
  for (const auto& layer : layers_) layer->save_state(out, prefix + "/" + layer->name());
}

void Model::load_state(const StateDict& in, const std::string& prefix) {
  for (const auto& p : params())
    in.read_tensor(state_key(prefix, p), p.value->values(), p.value->shape(), shard_of(p));
  for (const auto& layer : layers_) layer->load_state(in, prefix + "/" + layer->name());
}

std::vector<Param> Model::trainable_params() {
  std::vector<Param> out;
  for (auto& p : params())
    if (p.trainable) out.push_back(p);
  return out;
}

std::vector<Param> Model::params() {
  std::vector<Param> all;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    for (auto& p : params_of(i)) all.push_back(p);
  return all;
}

std::int64_t Model::parameter_count() {
  std::int64_t n = 0;
  for (auto& p : params()) n += p.value->size();
  return n;
}

std::string Model::summary() {
  std::string text;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::int64_t count = 0;
    for (auto& p : layers_[i]->params()) count += p.value->size();
    text += fmt::format("  {:<14} {:<11} out {:<14} params {}\n", layers_[i]->name(),
                        layers_[i]->kind(), shape_string(output_shapes_[i]), count);
  }
  text += fmt::format("  total parameters {}\n", parameter_count());
  return text;
}

}  // namespace strata
