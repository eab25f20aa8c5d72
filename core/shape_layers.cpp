#include "core/shape_layers.hpp"

#include <algorithm>

namespace strata {

// Flattening always yields plain (C,H,W) order, whatever the input layout, so that dense weights
// mean the same thing as in any other framework.
void FlattenLayer::forward(const Tensor& in, Tensor& out, bool /*training*/) {
  const Shape flat{in.dim(0), in.size() / std::max<std::int64_t>(in.dim(0), 1)};
  if (in.layout() != Layout::plain) {
    convert_layout(in, out, Layout::plain);
    out.reshape(flat);
    return;
  }
  out.resize(flat);
  std::copy(in.values().begin(), in.values().end(), out.values().begin());
}

void FlattenLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                            Tensor* grad_in) {
  if (grad_in == nullptr) return;
  // The flat gradient is the input's values in plain order: convert them straight into its layout.
  grad_in->resize(in.shape(), in.layout());
  convert_layout(grad_out.data(), in.shape(), Layout::plain, grad_in->data(), in.layout());
}

void DropoutLayer::forward(const Tensor& in, Tensor& out, bool training) {
  out.resize(in.shape(), in.layout());
  last_was_training_ = training && rate_ > 0.0f;
  if (!last_was_training_) {
    std::copy(in.values().begin(), in.values().end(), out.values().begin());
    return;
  }
  mask_.resize(in.shape(), in.layout());
  const float keep_scale = 1.0f / (1.0f - rate_);
  const std::int64_t rows = in.dim(0), per_row = in.size() / std::max<std::int64_t>(rows, 1);
  // Element j of a row (in plain C,H,W order, whatever the memory layout) takes draw j + 1 of its
  // row's stream, so that a mask does not depend on the layout or the device (the CUDA kernel
  // draws the same way).
  const std::int64_t block = channel_block(in.layout());
  const std::int64_t plane = block > 1 ? in.dim(2) * in.dim(3) : 1;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint64_t key =
        derive_seed(key_, {step_, first_sample_ + static_cast<std::uint64_t>(r)});
    for (std::int64_t at = 0; at < per_row; ++at) {
      // Blocked: at = (b * plane + pixel) * block + lane holds channel b * block + lane.
      const std::int64_t j =
          ((at / (block * plane)) * block + at % block) * plane + (at / block) % plane;
      const std::int64_t i = r * per_row + at;
      mask_[i] = uniform24(stream_draw(key, static_cast<std::uint64_t>(j) + 1)) < rate_
                     ? 0.0f
                     : keep_scale;
      out[i] = in[i] * mask_[i];
    }
  }
}

void DropoutLayer::save_state(StateDict& out, const std::string& prefix) const {
  // The key's bits, as HDF5 attributes hold signed integers.
  out.put_int(prefix + "/key", static_cast<std::int64_t>(key_));
}

void DropoutLayer::load_state(const StateDict& in, const std::string& prefix) {
  key_ = static_cast<std::uint64_t>(in.get_int(prefix + "/key"));
}

void DropoutLayer::backward(const Tensor& in, const Tensor& /*out*/, const Tensor& grad_out,
                            Tensor* grad_in) {
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape(), in.layout());
  for (std::int64_t i = 0; i < in.size(); ++i)
    (*grad_in)[i] = last_was_training_ ? grad_out[i] * mask_[i] : grad_out[i];
}

}  // namespace strata
