#include "core/dense_layer.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "core/gemm.hpp"
#include "core/init.hpp"

namespace strata {

DenseLayer::DenseLayer(std::string name, std::int64_t units, InitKind init)
    : Layer(std::move(name)), units_(units), init_(init) {}

Shape DenseLayer::build(const Shape& input_shape) {
  if (input_shape.size() != 1)
    throw std::invalid_argument(
        fmt::format("layer {}: dense needs a flat input, got {} (add a flatten layer)", name(),
                    shape_string(input_shape)));
  inputs_ = input_shape[0];
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
  const auto batch = static_cast<int>(in.dim(0));
  const auto n_in = static_cast<int>(inputs_), n_out = static_cast<int>(units_);
  out.resize({batch, units_});
  float* y = out.data();
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < n_out; ++o) y[b * n_out + o] = bias_[o];
  sgemm(Transpose::no, Transpose::yes, batch, n_out, n_in, 1.0f, in.data(), n_in, weight_.data(),
        n_in, 1.0f, y, n_out);
}

void DenseLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                          Tensor* grad_in) {
  const auto batch = static_cast<int>(in.dim(0));
  const auto n_in = static_cast<int>(inputs_), n_out = static_cast<int>(units_);
  const float* dy = grad_out.data();
  // dW[o,i] = sum_b dy[b,o] * x[b,i]
  sgemm(Transpose::yes, Transpose::no, n_out, n_in, batch, 1.0f, dy, n_out, in.data(), n_in, 0.0f,
        weight_grad_.data(), n_in);
  float* db = bias_grad_.data();
  for (int o = 0; o < n_out; ++o) db[o] = 0.0f;
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < n_out; ++o) db[o] += dy[b * n_out + o];
  if (grad_in != nullptr) {
    grad_in->resize(in.shape());
    sgemm(Transpose::no, Transpose::no, batch, n_in, n_out, 1.0f, dy, n_out, weight_.data(), n_in,
          0.0f, grad_in->data(), n_in);
  }
}

std::vector<Param> DenseLayer::params() {
  return {{name() + "/weight", &weight_, &weight_grad_}, {name() + "/bias", &bias_, &bias_grad_}};
}

}  // namespace strata
