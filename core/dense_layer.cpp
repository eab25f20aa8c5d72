#include "core/dense_layer.hpp"

#include <dnnl.hpp>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "core/gemm.hpp"
#include "core/init.hpp"
#include "core/worker_pool.hpp"

namespace strata {

// The forward product on oneDNN's matmul primitive, made once per batch size: it reads W
// [outputs, inputs] in place as the transposed operand and adds the bias in the same pass, where
// sgemm's transposed product ran at 0.6-0.8x the speed on the benchmark CNN's and MLP's shapes.
// The gradients' products ran at 0.9-0.95 of sgemm's peak rate there (on AVX-512) and stay on
// sgemm (dense_backward).
// A unit range's product reads its rows of W in place.
struct DenseLayer::Forward {
  Forward(std::int64_t batch_size, std::int64_t inputs, std::int64_t units)
      : batch(batch_size),
        input({batch_size, inputs}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        weight({inputs, units}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, inputs}),
        bias({1, units}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        output({batch_size, units}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab),
        matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(input, weight, bias, output),
                                            engine)) {}
  std::int64_t batch;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc input, weight, bias, output;
  dnnl::matmul matmul;

  // out (batch x units) = in W^T + b for W's rows at `weight_rows`.
  void run(const float* in, const float* weight_rows, const float* bias_values, float* out) {
    using dnnl::memory;
    memory src(input, engine, const_cast<float*>(in)),
        w(weight, engine, const_cast<float*>(weight_rows)),
        b(this->bias, engine, const_cast<float*>(bias_values)), dst(output, engine, out);
    matmul.execute(
        stream,
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

struct DenseLayer::UnitShare {
  std::int64_t first = 0, last = 0;  // the worker's units
  RecentCache<std::int64_t, Forward> forward;
  GemmRowPadding padding;
  // Its units' columns of the output: oneDNN's matmul into the strided columns of the whole
  // output ran on its gemm path at 0.5-0.7x the speed of its brgemm kernels into a plain tensor,
  // and 100 times slower for 5 of 10 units; the copy costs a few microseconds.
  Tensor out;
  Tensor input_grad;  // its units' part of the input gradient
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
  unit_shares_.clear();
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
  f.run(in.data(), weight_.data(), bias_.data(), out.data());
}

void DenseLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                          Tensor* grad_in) {
  if (grad_in != nullptr) grad_in->resize(in.shape());
  dense_backward(
      static_cast<int>(in.dim(0)), static_cast<int>(inputs_), static_cast<int>(units_), in.data(),
      weight_.data(), {grad_out.data(), static_cast<int>(units_)},
      {weight_grad_.data(), bias_grad_.data(), grad_in != nullptr ? grad_in->data() : nullptr},
      gemm_padding_);
}

void DenseLayer::prepare_unit_split(int workers) {
  if (unit_shares_.size() == static_cast<std::size_t>(workers)) return;
  unit_shares_.clear();
  for (int w = 0; w < workers; ++w) {
    auto share = std::make_unique<UnitShare>();
    std::tie(share->first, share->last) = worker_share(units_, workers, w);
    unit_shares_.push_back(std::move(share));
  }
}

void DenseLayer::forward_units(const Tensor& in, Tensor& out, int worker) {
  UnitShare& share = *unit_shares_[static_cast<std::size_t>(worker)];
  const std::int64_t batch = in.dim(0), units = share.last - share.first;
  if (batch == 0 || units == 0) return;
  Forward& f =
      share.forward.get(batch, [&] { return std::make_unique<Forward>(batch, inputs_, units); });
  share.out.resize({batch, units});
  f.run(in.data(), weight_.data() + share.first * inputs_, bias_.data() + share.first,
        share.out.data());
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy_n(share.out.data() + b * units, units, out.data() + b * units_ + share.first);
}

void DenseLayer::backward_units(const Tensor& in, const Tensor& grad_out, int worker,
                                bool input_grad) {
  UnitShare& share = *unit_shares_[static_cast<std::size_t>(worker)];
  const std::int64_t units = share.last - share.first;
  if (units == 0) return;
  if (input_grad) share.input_grad.resize(in.shape());
  dense_backward(static_cast<int>(in.dim(0)), static_cast<int>(inputs_), static_cast<int>(units),
                 in.data(), weight_.data() + share.first * inputs_,
                 {grad_out.data() + share.first, static_cast<int>(units_)},
                 {weight_grad_.data() + share.first * inputs_, bias_grad_.data() + share.first,
                  input_grad ? share.input_grad.data() : nullptr},
                 share.padding);
}

std::pair<std::int64_t, std::int64_t> DenseLayer::units_of(int worker) const {
  const UnitShare& share = *unit_shares_[static_cast<std::size_t>(worker)];
  return {share.first, share.last};
}

void DenseLayer::add_unit_input_grads(Tensor& grad_in, std::int64_t first,
                                      std::int64_t last) const {
  const std::int64_t rows = grad_in.dim(0), width = last - first;
  float* sum = grad_in.data();
  for (std::int64_t r = 0; r < rows; ++r) std::fill_n(sum + r * inputs_ + first, width, 0.0f);
  for (const auto& share : unit_shares_) {
    if (share->last == share->first) continue;  // a worker with no units wrote nothing
    const float* part = share->input_grad.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t at = r * inputs_ + first;
      for (std::int64_t j = 0; j < width; ++j) sum[at + j] += part[at + j];
    }
  }
}

std::vector<Param> DenseLayer::params() {
  return {{name() + "/weight", &weight_, &weight_grad_}, {name() + "/bias", &bias_, &bias_grad_}};
}

}  // namespace strata
