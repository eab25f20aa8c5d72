#include "core/conv2d_layer.hpp"

#include <dnnl.hpp>

#include <stdexcept>

#include <fmt/format.h>

#include "core/conv_input_grad.hpp"
#include "core/conv_relu_max_pool.hpp"
#include "core/conv_weight_grad.hpp"
#include "core/dnnl_layout.hpp"
#include "core/init.hpp"
#include "core/pooled_conv_weight_grad.hpp"

namespace strata {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

// A strata tensor as oneDNN memory when its layout is the one a primitive wants, or a
// buffer of the wanted layout that the caller fills by reorder.
struct Operand {
  memory user;       // the strata tensor's own storage
  memory primitive;  // what the primitive reads or writes: `user` itself when the layouts agree
  bool needs_reorder() const { return primitive.get_data_handle() != user.get_data_handle(); }
};

Operand bind(const memory::desc& user_desc, const float* data, const memory::desc& wanted,
             memory& scratch, const dnnl::engine& engine) {
  Operand op;
  op.user = memory(user_desc, engine, const_cast<float*>(data));
  if (user_desc == wanted) {
    op.primitive = op.user;
  } else {
    if (!scratch || scratch.get_desc() != wanted) scratch = memory(wanted, engine);
    op.primitive = scratch;
  }
  return op;
}

void reorder(const memory& from, const memory& to, dnnl::stream& stream) {
  dnnl::reorder(from, to).execute(stream, const_cast<memory&>(from), const_cast<memory&>(to));
}

}  // namespace

// oneDNN picks its own (blocked) layouts for speed (format_tag::any); strata tensors carry their
// layout, so data moves only where the layouts of neighbouring layers disagree.
struct Conv2DLayer::Primitives {
  std::int64_t batch = 0;
  Layout input_layout = Layout::plain;
  Layout output_layout = Layout::plain;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  // The weight gradient as a forward convolution where that is the faster path (see
  // make_primitives); else null, and bwd_weights computes it.
  std::unique_ptr<ConvWeightGradient> weight_grad;
  // The input gradient by GEMM and scatter-add where that beats bwd_data's kernel; else null.
  std::unique_ptr<ConvInputGradient> input_grad;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  // Scratch buffers in the primitives' layouts, used only when a strata tensor's layout differs.
  memory src, dst, fwd_weights, bwd_src, diff_dst_w, diff_dst_d, diff_weights, bwd_data_weights,
      diff_src;
};

Conv2DLayer::Conv2DLayer(std::string name, int filters, int kernel, int stride, int padding,
                         InitKind init)
    : Layer(std::move(name)),
      filters_(filters),
      kernel_(kernel),
      stride_(stride),
      padding_(padding),
      init_(init) {}

Conv2DLayer::~Conv2DLayer() = default;

Shape Conv2DLayer::build(const Shape& input_shape) {
  if (input_shape.size() != 3)
    throw std::invalid_argument(fmt::format("layer {}: conv2d needs a [C,H,W] input, got {}",
                                            name(), shape_string(input_shape)));
  channels_ = input_shape[0];
  in_h_ = input_shape[1];
  in_w_ = input_shape[2];
  const std::int64_t pad = padding_;
  const std::int64_t span_h = in_h_ + 2 * pad - kernel_, span_w = in_w_ + 2 * pad - kernel_;
  if (span_h < 0 || span_w < 0)
    throw std::invalid_argument(
        fmt::format("layer {}: kernel {} does not fit the padded input {}x{}", name(), kernel_,
                    in_h_ + 2 * pad, in_w_ + 2 * pad));
  out_h_ = span_h / stride_ + 1;
  out_w_ = span_w / stride_ + 1;
  weight_ = Tensor({filters_, channels_, kernel_, kernel_});
  weight_grad_ = Tensor(weight_.shape());
  bias_ = Tensor({filters_});
  bias_grad_ = Tensor({filters_});
  primitives_.clear();
  pooled_weight_grad_.reset();
  max_pooled_forward_.reset();
  return {filters_, out_h_, out_w_};
}

void Conv2DLayer::initialize(Rng& rng) {
  const std::int64_t area = std::int64_t{kernel_} * kernel_;
  initialize_weights(weight_, init_, channels_ * area, filters_ * area, rng);
  initialize_bias(bias_, init_, channels_ * area, rng);
}

Conv2DLayer::Primitives& Conv2DLayer::primitives_for(std::int64_t batch, Layout input_layout) {
  return primitives_.get({batch, input_layout},
                         [&] { return make_primitives(batch, input_layout); });
}

ConvGeometry Conv2DLayer::geometry(std::int64_t batch) const {
  return {batch, channels_, in_h_, in_w_, filters_, kernel_, stride_, padding_, out_h_, out_w_};
}

std::unique_ptr<Conv2DLayer::Primitives> Conv2DLayer::make_primitives(std::int64_t batch,
                                                                      Layout input_layout) const {
  auto p = std::make_unique<Primitives>();
  p->batch = batch;
  p->input_layout = input_layout;
  const memory::dims weight_dims{filters_, channels_, kernel_, kernel_};
  const memory::dims strides{stride_, stride_}, pads{padding_, padding_};
  // The input layout is given; oneDNN chooses the weights and output layouts.
  const auto src_md = activation_desc(batch, channels_, in_h_, in_w_, input_layout);
  const memory::desc weight_any(weight_dims, dt::f32, tag::any),
      bias_md({filters_}, dt::f32, tag::x),
      dst_any({batch, filters_, out_h_, out_w_}, dt::f32, tag::any);
  const memory::desc src_any({batch, channels_, in_h_, in_w_}, dt::f32, tag::any);

  dnnl::primitive_attr attr;
  if (fused_relu_) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  p->fwd_pd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src_md, weight_any,
                                      bias_md, dst_any, strides, pads, pads),
      attr, p->engine);
  p->bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_any,
                                            weight_any, dst_any, strides, pads, pads),
      p->engine, p->fwd_pd);
  p->fwd = dnnl::convolution_forward(p->fwd_pd);
  p->bwd_data = dnnl::convolution_backward_data(p->bwd_data_pd);
  // The output stays in oneDNN's layout when strata has that layout too (nChw16c on AVX-512, nChw8c
  // on AVX2), so that pooling and the next conv read it without a reorder.
  p->output_layout = Layout::plain;
  for (const Layout blocked : {Layout::channel_blocked16, Layout::channel_blocked8})
    if (filters_ % channel_block(blocked) == 0 &&
        p->fwd_pd.dst_desc() == activation_desc(batch, filters_, out_h_, out_w_, blocked))
      p->output_layout = blocked;
  if (input_gradient_by_gemm(p->bwd_data_pd.impl_info_str(), input_layout))
    p->input_grad = std::make_unique<ConvInputGradient>(geometry(batch), p->output_layout,
                                                        input_layout, p->engine);
  const auto backward_weights_desc = [&] {
    return dnnl::convolution_backward_weights::primitive_desc(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any,
                                                 weight_any, bias_md, dst_any, strides, pads, pads),
        p->engine, p->fwd_pd);
  };
  // The weight gradient: oneDNN's backward-weights kernel where it reads a plain input as it is
  // (AVX-512's, on one channel: 2-3.6 times faster on the first conv than the forward convolution
  // in one piece, whose kernel is then the input's whole plane); else a forward convolution where
  // oneDNN has a fast kernel for that (a backward-weights kernel that wants the input in channel
  // blocks pads its channels: AVX2's, 8 times the work on one channel); else the backward-weights
  // kernel.
  bool by_backward_weights = false;
  if (input_layout == Layout::plain) {
    p->bwd_weights_pd = backward_weights_desc();
    by_backward_weights = p->bwd_weights_pd.src_desc() == src_md;
  }
  if (!by_backward_weights) {
    auto weight_grad = std::make_unique<ConvWeightGradient>(
        geometry(batch), src_md, activation_desc(batch, filters_, out_h_, out_w_, p->output_layout),
        p->engine);
    if (weight_grad->fast()) p->weight_grad = std::move(weight_grad);
  }
  if (!p->weight_grad) {
    if (!p->bwd_weights_pd) p->bwd_weights_pd = backward_weights_desc();
    p->bwd_weights = dnnl::convolution_backward_weights(p->bwd_weights_pd);
  }
  return p;
}

std::string Conv2DLayer::implementation() const {
  const Primitives* newest = primitives_.newest();
  if (newest == nullptr) return "not built";
  // oneDNN's forward kernel does not run where the fused one does.
  std::string name = max_pooled_forward_
                         ? std::string("strata's fused conv, ReLU and max pooling forward")
                         : newest->fwd_pd.impl_info_str();
  if (pooling_) return name + ", weight gradient from the max pooling";
  name += newest->weight_grad
              ? std::string(", weight gradient as a forward convolution")
              : std::string(", weight gradient on ") + newest->bwd_weights_pd.impl_info_str();
  name += newest->input_grad
              ? ", input gradient by GEMM"
              : std::string(", input gradient on ") + newest->bwd_data_pd.impl_info_str();
  return name;
}

void Conv2DLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  const std::int64_t batch = in.dim(0);
  Primitives& p = primitives_for(batch, in.layout());
  out.resize({batch, filters_, out_h_, out_w_}, p.output_layout);
  const memory src(activation_desc(batch, channels_, in_h_, in_w_, in.layout()), p.engine,
                   const_cast<float*>(in.data()));
  const Operand weights = bind({{filters_, channels_, kernel_, kernel_}, dt::f32, tag::oihw},
                               weight_.data(), p.fwd_pd.weights_desc(), p.fwd_weights, p.engine);
  const memory bias({{filters_}, dt::f32, tag::x}, p.engine, bias_.data());
  const Operand dst = bind(activation_desc(batch, filters_, out_h_, out_w_, p.output_layout),
                           out.data(), p.fwd_pd.dst_desc(), p.dst, p.engine);
  if (weights.needs_reorder()) reorder(weights.user, weights.primitive, p.stream);
  p.fwd.execute(p.stream, {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_WEIGHTS, weights.primitive},
                           {DNNL_ARG_BIAS, bias},
                           {DNNL_ARG_DST, dst.primitive}});
  if (dst.needs_reorder()) reorder(dst.primitive, dst.user, p.stream);
  p.stream.wait();
}

// The weight and bias gradients on oneDNN's backward-weights primitive.
void Conv2DLayer::weight_gradient(Primitives& p, const Tensor& in, const float* diff,
                                  Layout grad_layout) {
  const std::int64_t batch = in.dim(0);
  const auto out_desc = activation_desc(batch, filters_, out_h_, out_w_, grad_layout);
  const Operand src = bind(activation_desc(batch, channels_, in_h_, in_w_, in.layout()), in.data(),
                           p.bwd_weights_pd.src_desc(), p.bwd_src, p.engine);
  const Operand diff_dst_w =
      bind(out_desc, diff, p.bwd_weights_pd.diff_dst_desc(), p.diff_dst_w, p.engine);
  const Operand diff_weights =
      bind({{filters_, channels_, kernel_, kernel_}, dt::f32, tag::oihw}, weight_grad_.data(),
           p.bwd_weights_pd.diff_weights_desc(), p.diff_weights, p.engine);
  const memory diff_bias({{filters_}, dt::f32, tag::x}, p.engine, bias_grad_.data());
  if (src.needs_reorder()) reorder(src.user, src.primitive, p.stream);
  if (diff_dst_w.needs_reorder()) reorder(diff_dst_w.user, diff_dst_w.primitive, p.stream);
  p.bwd_weights.execute(p.stream, {{DNNL_ARG_SRC, src.primitive},
                                   {DNNL_ARG_DIFF_DST, diff_dst_w.primitive},
                                   {DNNL_ARG_DIFF_WEIGHTS, diff_weights.primitive},
                                   {DNNL_ARG_DIFF_BIAS, diff_bias}});
  if (diff_weights.needs_reorder()) reorder(diff_weights.primitive, diff_weights.user, p.stream);
}

void Conv2DLayer::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                           Tensor* grad_in) {
  const std::int64_t batch = in.dim(0);
  Primitives& p = primitives_for(batch, in.layout());
  const float* diff = grad_out.data();
  if (fused_relu_ && !relu_derivative_applied_) {
    // d relu(z)/dz is 1 where the output is positive; the output is all the forward kept.
    masked_grad_.resize(grad_out.shape(), grad_out.layout());
    const float* y = out.data();
    float* g = masked_grad_.data();
    for (std::int64_t i = 0; i < grad_out.size(); ++i) g[i] = y[i] > 0.0f ? diff[i] : 0.0f;
    diff = masked_grad_.data();
  }
  if (p.weight_grad) {
    if (grad_out.layout() != p.output_layout)
      throw std::logic_error(
          fmt::format("layer {}: the output gradient is not in the output's layout", name()));
    p.weight_grad->compute(in.data(), diff, weight_grad_.data(), p.stream);
    conv_bias_gradient(diff, batch, filters_, out_h_ * out_w_, channel_block(p.output_layout),
                       bias_grad_.data());
  } else {
    weight_gradient(p, in, diff, grad_out.layout());
  }
  if (grad_in != nullptr && p.input_grad && grad_out.layout() == p.output_layout) {
    grad_in->resize(in.shape(), in.layout());
    p.input_grad->compute(diff, weight_.data(), grad_in->data(), p.stream);
  } else if (grad_in != nullptr) {
    grad_in->resize(in.shape(), in.layout());
    const auto out_desc = activation_desc(batch, filters_, out_h_, out_w_, grad_out.layout());
    const Operand diff_dst_d =
        bind(out_desc, diff, p.bwd_data_pd.diff_dst_desc(), p.diff_dst_d, p.engine);
    const Operand weights =
        bind({{filters_, channels_, kernel_, kernel_}, dt::f32, tag::oihw}, weight_.data(),
             p.bwd_data_pd.weights_desc(), p.bwd_data_weights, p.engine);
    const Operand diff_src =
        bind(activation_desc(batch, channels_, in_h_, in_w_, in.layout()), grad_in->data(),
             p.bwd_data_pd.diff_src_desc(), p.diff_src, p.engine);
    if (diff_dst_d.needs_reorder()) reorder(diff_dst_d.user, diff_dst_d.primitive, p.stream);
    if (weights.needs_reorder()) reorder(weights.user, weights.primitive, p.stream);
    p.bwd_data.execute(p.stream, {{DNNL_ARG_DIFF_DST, diff_dst_d.primitive},
                                  {DNNL_ARG_WEIGHTS, weights.primitive},
                                  {DNNL_ARG_DIFF_SRC, diff_src.primitive}});
    if (diff_src.needs_reorder()) reorder(diff_src.primitive, diff_src.user, p.stream);
  }
  p.stream.wait();
}

void Conv2DLayer::take_weight_gradient_from(const std::optional<MaxPoolWindows>& pooling) {
  pooling_ = pooling;
  pooled_weight_grad_.reset();
}

void Conv2DLayer::set_max_pooling_after(const std::optional<MaxPoolWindows>& pooling) {
  pooling_after_ = pooling;
  max_pooled_forward_.reset();
}

// oneDNN's output layout for the conv is the CPU's, whatever the batch: it is read once, from the
// first batch's primitives, and the kernel built then keeps it, so that a new batch size (the
// epoch's last, an evaluation's) builds no primitives that the fused pass never runs.
std::optional<Layout> Conv2DLayer::max_pooled_layout(std::int64_t batch, Layout input_layout) {
  if (!pooling_after_ || !fused_relu_ || input_layout != Layout::plain) return std::nullopt;
  if (max_pooled_forward_) return max_pooled_forward_->layout();
  const Layout layout = primitives_for(batch, input_layout).output_layout;
  if (layout == Layout::plain ||
      !ConvReluMaxPool::fits(geometry(batch), *pooling_after_, channel_block(layout)))
    return std::nullopt;
  max_pooled_forward_ = std::make_unique<ConvReluMaxPool>(geometry(0), *pooling_after_, layout);
  return layout;
}

void Conv2DLayer::forward_max_pooled(const Tensor& in, float* pooled, std::uint8_t* first_maxima) {
  if (!max_pooled_layout(in.dim(0), in.layout()))
    throw std::logic_error(fmt::format(
        "layer {}: the fused conv, ReLU and max pooling kernel does not run this conv", name()));
  max_pooled_forward_->compute(in.dim(0), in.data(), weight_.data(), bias_.data(), pooled,
                               first_maxima);
}

void Conv2DLayer::backward_from_max_pool(const Tensor& in,
                                         std::span<const std::uint8_t> first_maxima,
                                         const Tensor& pooled_grad) {
  if (!pooling_)
    throw std::logic_error(
        fmt::format("layer {}: no max pooling was named to take gradients from", name()));
  if (static_cast<std::int64_t>(first_maxima.size()) != pooled_grad.size())
    throw std::logic_error(
        fmt::format("layer {}: the pooling recorded {} first maxima for {} gradients (backward "
                    "needs the last forward pass to have been a training one)",
                    name(), first_maxima.size(), pooled_grad.size()));
  if (!pooled_weight_grad_)
    pooled_weight_grad_ = std::make_unique<PooledConvWeightGradient>(geometry(0), *pooling_);
  pooled_weight_grad_->compute(in.dim(0), in.data(), in.layout(), first_maxima.data(),
                               pooled_grad.data(), pooled_grad.layout(), weight_grad_.data(),
                               bias_grad_.data());
}

std::vector<Param> Conv2DLayer::params() {
  return {{name() + "/weight", &weight_, &weight_grad_}, {name() + "/bias", &bias_, &bias_grad_}};
}

}  // namespace strata
