#include "core/dense_layer.hpp"

#include <dnnl.hpp>

#include <stdexcept>

#include <fmt/format.h>

#include "core/gemm.hpp"
#include "core/init.hpp"

namespace strata {

// The forward product on oneDNN's matmul primitive, made once per batch size: it reads W
// [outputs, inputs] in place as the transposed operand and adds the bias in the same pass, where
// sgemm's transposed product ran at 0.6-0.8x the speed on the benchmark CNN's and MLP's shapes.
// The gradients' products ran at 0.9-0.95 of sgemm's peak rate there (on AVX-512) and stay on
// sgemm (dense_backward).
struct DenseLayer::Forward {
  Forward(std::int64_t batch_size, std::int64_t inputs, std::int64_t units)
      : batch(batch_size),
        input({batch_size, inputs}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        weight({inputs, units}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ba),
        bias({1, units}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        output({batch_size, units}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(input, weight, bias, output),
                                            engine)) {}
  std::int64_t batch;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc input, weight, bias, output;
  dnnl::matmul matmul;
};

DenseLayer::DenseLayer(std::string name, std::int64_t units, InitKind init)
    : Layer(std::move(name)), units_(units), init_(init) {}

DenseLayer::~DenseLayer() = default;

Shape DenseLayer::build(const Shape& input_shape) {
  if (input_shape.size() != 1)
    throw std::invalid_argument(
        fmt::format("layer {}: dense needs a flat input, got {} (add a flatten layer)", name(),
                    shape_string(input_shape)));
  inputs_ = input_shape[0];
  forward_.clear();
  weight_ = Tensor({units_, inputs_});
  weight_grad_ = Tensor({units_, inputs_});
  bias_ = Tensor({units_});
  bias_grad_ = Tensor({units_});
  return {units_};
}

void DenseLayer::initialize(Rng& rng) {
  initialize_weights(weight_, init_, inputs_, units_, rng);
  initialize_bias(bias_, init_, inputs_, rng);
}

void DenseLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  const std::int64_t batch = in.dim(0);
  out.resize({batch, units_});
  if (batch == 0) return;  // oneDNN's matmul takes no empty batch
  Forward& f =
      forward_.get(batch, [&] { return std::make_unique<Forward>(batch, inputs_, units_); });
  using dnnl::memory;
  memory input(f.input, f.engine, const_cast<float*>(in.data())),
      weight(f.weight, f.engine, weight_.data()), bias(f.bias, f.engine, bias_.data()),
      output(f.output, f.engine, out.data());
  f.matmul.execute(f.stream, {{DNNL_ARG_SRC, input},
                              {DNNL_ARG_WEIGHTS, weight},
                              {DNNL_ARG_BIAS, bias},
                              {DNNL_ARG_DST, output}});
  f.stream.wait();
}

void DenseLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                          Tensor* grad_in) {
  if (grad_in != nullptr) grad_in->resize(in.shape());
  dense_backward(
      static_cast<int>(in.dim(0)), static_cast<int>(inputs_), static_cast<int>(units_), in.data(),
      weight_.data(), grad_out.data(),
      {weight_grad_.data(), bias_grad_.data(), grad_in != nullptr ? grad_in->data() : nullptr},
      gemm_padding_);
}

std::vector<Param> DenseLayer::params() {
  return {{name() + "/weight", &weight_, &weight_grad_}, {name() + "/bias", &bias_, &bias_grad_}};
}

}  // namespace strata
