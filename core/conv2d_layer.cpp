#include "core/conv2d_layer.hpp"

#include <dnnl.hpp>

#include <stdexcept>

#include <fmt/format.h>

#include "core/init.hpp"

namespace strata {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// oneDNN chooses its own (blocked) layouts for speed (format_tag::any); strata's tensors stay NCHW,
// so each pass reorders at its edges when the chosen layout differs.
struct Conv2DLayer::Primitives {
  std::int64_t batch = 0;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  memory src;           // forward input in the forward layout, kept for backward
  memory dst;           // forward output in the forward layout
  memory fwd_weights;   // weights in the forward layout
  memory bwd_src;       // backward-weights input layout (aliases src when equal)
  memory diff_dst_w;    // grad_out in the backward-weights layout
  memory diff_dst_d;    // grad_out in the backward-data layout
  memory diff_weights;  // weight gradient in the backward-weights layout
  memory bwd_weights_mem;  // weights in the backward-data layout
  memory diff_src;      // input gradient in the backward-data layout
};

namespace {

memory::dims to_dims(std::initializer_list<std::int64_t> values) { return memory::dims(values); }

void reorder_into(const memory& from, const memory& to, dnnl::stream& stream) {
  dnnl::reorder(from, to).execute(stream, const_cast<memory&>(from), const_cast<memory&>(to));
}

}  // namespace

Conv2DLayer::Conv2DLayer(std::string name, int filters, int kernel, int stride, int padding, InitKind init)
    : Layer(std::move(name)), filters_(filters), kernel_(kernel), stride_(stride), padding_(padding), init_(init) {}

Conv2DLayer::~Conv2DLayer() = default;

Shape Conv2DLayer::build(const Shape& input_shape) {
  if (input_shape.size() != 3)
    throw std::invalid_argument(
        fmt::format("layer {}: conv2d needs a [C,H,W] input, got {}", name(), shape_string(input_shape)));
  channels_ = input_shape[0];
  in_h_ = input_shape[1];
  in_w_ = input_shape[2];
  const std::int64_t span_h = in_h_ + 2 * padding_ - kernel_, span_w = in_w_ + 2 * padding_ - kernel_;
  if (span_h < 0 || span_w < 0)
    throw std::invalid_argument(fmt::format("layer {}: kernel {} does not fit the padded input {}x{}", name(),
                                            kernel_, in_h_ + 2 * padding_, in_w_ + 2 * padding_));
  out_h_ = span_h / stride_ + 1;
  out_w_ = span_w / stride_ + 1;
  weight_ = Tensor({filters_, channels_, kernel_, kernel_});
  weight_grad_ = Tensor(weight_.shape());
  bias_ = Tensor({filters_});
  bias_grad_ = Tensor({filters_});
  primitives_.reset();
  return {filters_, out_h_, out_w_};
}

void Conv2DLayer::initialize(Rng& rng) {
  const std::int64_t area = std::int64_t{kernel_} * kernel_;
  initialize_weights(weight_, init_, channels_ * area, filters_ * area, rng);
  bias_.fill(0.0f);
}

Conv2DLayer::Primitives& Conv2DLayer::primitives_for(std::int64_t batch) {
  if (primitives_ && primitives_->batch == batch) return *primitives_;
  auto p = std::make_unique<Primitives>();
  p->batch = batch;
  const auto src_dims = to_dims({batch, channels_, in_h_, in_w_});
  const auto weight_dims = to_dims({filters_, channels_, kernel_, kernel_});
  const auto bias_dims = to_dims({filters_});
  const auto dst_dims = to_dims({batch, filters_, out_h_, out_w_});
  const auto strides = to_dims({stride_, stride_});
  const auto pads = to_dims({padding_, padding_});
  const memory::desc src_any(src_dims, dt::f32, tag::any), weight_any(weight_dims, dt::f32, tag::any),
      bias_md(bias_dims, dt::f32, tag::x), dst_any(dst_dims, dt::f32, tag::any);

  p->fwd_pd = dnnl::convolution_forward::primitive_desc(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                      src_any, weight_any, bias_md, dst_any, strides, pads, pads),
      p->engine);
  p->bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_any, weight_any, dst_any,
                                            strides, pads, pads),
      p->engine, p->fwd_pd);
  p->bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, weight_any, bias_md,
                                               dst_any, strides, pads, pads),
      p->engine, p->fwd_pd);
  p->fwd = dnnl::convolution_forward(p->fwd_pd);
  p->bwd_data = dnnl::convolution_backward_data(p->bwd_data_pd);
  p->bwd_weights = dnnl::convolution_backward_weights(p->bwd_weights_pd);

  p->src = memory(p->fwd_pd.src_desc(), p->engine);
  p->dst = memory(p->fwd_pd.dst_desc(), p->engine);
  p->fwd_weights = memory(p->fwd_pd.weights_desc(), p->engine);
  p->bwd_src = p->bwd_weights_pd.src_desc() == p->fwd_pd.src_desc() ? p->src
                                                                    : memory(p->bwd_weights_pd.src_desc(), p->engine);
  p->diff_dst_w = memory(p->bwd_weights_pd.diff_dst_desc(), p->engine);
  p->diff_dst_d = p->bwd_data_pd.diff_dst_desc() == p->bwd_weights_pd.diff_dst_desc()
                      ? p->diff_dst_w
                      : memory(p->bwd_data_pd.diff_dst_desc(), p->engine);
  p->diff_weights = memory(p->bwd_weights_pd.diff_weights_desc(), p->engine);
  p->bwd_weights_mem = memory(p->bwd_data_pd.weights_desc(), p->engine);
  p->diff_src = memory(p->bwd_data_pd.diff_src_desc(), p->engine);
  primitives_ = std::move(p);
  return *primitives_;
}

std::string Conv2DLayer::implementation() const {
  return primitives_ ? std::string(primitives_->fwd_pd.impl_info_str()) : std::string("not built");
}

void Conv2DLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  const std::int64_t batch = in.dim(0);
  Primitives& p = primitives_for(batch);
  out.resize({batch, filters_, out_h_, out_w_});
  const memory user_src({{batch, channels_, in_h_, in_w_}, dt::f32, tag::nchw}, p.engine,
                        const_cast<float*>(in.data()));
  const memory user_weights({{filters_, channels_, kernel_, kernel_}, dt::f32, tag::oihw}, p.engine,
                            weight_.data());
  const memory bias({{filters_}, dt::f32, tag::x}, p.engine, bias_.data());
  const memory user_dst({{batch, filters_, out_h_, out_w_}, dt::f32, tag::nchw}, p.engine, out.data());

  reorder_into(user_src, p.src, p.stream);
  reorder_into(user_weights, p.fwd_weights, p.stream);
  p.fwd.execute(p.stream, {{DNNL_ARG_SRC, p.src},
                           {DNNL_ARG_WEIGHTS, p.fwd_weights},
                           {DNNL_ARG_BIAS, bias},
                           {DNNL_ARG_DST, p.dst}});
  reorder_into(p.dst, user_dst, p.stream);
  if (p.bwd_src != p.src) reorder_into(p.src, p.bwd_src, p.stream);
  p.stream.wait();
}

void Conv2DLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out, Tensor* grad_in) {
  const std::int64_t batch = in.dim(0);
  Primitives& p = primitives_for(batch);
  const memory user_diff_dst({{batch, filters_, out_h_, out_w_}, dt::f32, tag::nchw}, p.engine,
                             const_cast<float*>(grad_out.data()));
  const memory user_diff_weights({{filters_, channels_, kernel_, kernel_}, dt::f32, tag::oihw}, p.engine,
                                 weight_grad_.data());
  const memory diff_bias({{filters_}, dt::f32, tag::x}, p.engine, bias_grad_.data());

  reorder_into(user_diff_dst, p.diff_dst_w, p.stream);
  p.bwd_weights.execute(p.stream, {{DNNL_ARG_SRC, p.bwd_src},
                                   {DNNL_ARG_DIFF_DST, p.diff_dst_w},
                                   {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights},
                                   {DNNL_ARG_DIFF_BIAS, diff_bias}});
  reorder_into(p.diff_weights, user_diff_weights, p.stream);

  if (grad_in != nullptr) {
    grad_in->resize(in.shape());
    const memory user_weights({{filters_, channels_, kernel_, kernel_}, dt::f32, tag::oihw}, p.engine,
                              weight_.data());
    const memory user_diff_src({{batch, channels_, in_h_, in_w_}, dt::f32, tag::nchw}, p.engine,
                               grad_in->data());
    if (p.diff_dst_d != p.diff_dst_w) reorder_into(user_diff_dst, p.diff_dst_d, p.stream);
    reorder_into(user_weights, p.bwd_weights_mem, p.stream);
    p.bwd_data.execute(p.stream, {{DNNL_ARG_DIFF_DST, p.diff_dst_d},
                                  {DNNL_ARG_WEIGHTS, p.bwd_weights_mem},
                                  {DNNL_ARG_DIFF_SRC, p.diff_src}});
    reorder_into(p.diff_src, user_diff_src, p.stream);
  }
  p.stream.wait();
}

std::vector<Param> Conv2DLayer::params() {
  return {{name() + "/weight", &weight_, &weight_grad_}, {name() + "/bias", &bias_, &bias_grad_}};
}

}  // namespace strata
