#include "core/pool_layers.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/channel_lanes.hpp"

namespace strata {

namespace {

// Pooling walks "planes": one channel of one sample in the plain layout, or a block of 8 or 16
// channels of one sample in a blocked layout, where those channels sit side by side. A plane's
// element type V is a float for the plain layout and an 8- or 16-float vector for the blocked ones,
// so one code path serves all three and the blocked ones run as vector instructions (GCC/Clang
// vector extensions; the compiler did not vectorise the per-lane loops with their selects).

struct PlaneGeometry {
  std::int64_t planes, lanes, in_h, in_w, out_h, out_w;
};

PlaneGeometry geometry(const Tensor& in, std::int64_t out_h, std::int64_t out_w) {
  const std::int64_t lanes = channel_block(in.layout());
  return {in.dim(0) * in.dim(1) / lanes, lanes, in.dim(2), in.dim(3), out_h, out_w};
}

// `fixed`: the window's size and stride when known at compile time (2: the common 2x2, stride 2,
// whose loops the compiler then unrolls), else 0. `first_max`: where to record each window's first
// maximum (Pool2DLayer::first_maxima), or null.
template <class V, bool max_mode, int fixed = 0>
void pool_plane_forward(const float* x, float* y, std::uint8_t* first_max, const PlaneGeometry& g,
                        int size, int stride, bool relu_input) {
  if constexpr (fixed > 0) size = stride = fixed;
  constexpr std::int64_t L = lane_count<V>();
  const float inv_area = 1.0f / static_cast<float>(size * size);
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      const float* first = x + ((oh * stride) * g.in_w + ow * stride) * L;
      V acc = max_mode ? load_lanes<V>(first) : V{} * 0.0f;
      for (int kh = 0; kh < size; ++kh)
        for (int kw = 0; kw < size; ++kw) {
          const V v = load_lanes<V>(first + (kh * g.in_w + kw) * L);
          if constexpr (max_mode)
            acc = v > acc ? v : acc;
          else
            acc += v;
        }
      if constexpr (!max_mode) acc *= inv_area;
      store_lanes(y + (oh * g.out_w + ow) * L, acc);
      if constexpr (max_mode) {
        if (first_max == nullptr) continue;
        // Walked last to first, so that the first match is the one that stays; the window's
        // inputs are still in L1.
        using Ints = LaneInts<V>;
        Ints chosen = Ints{} + Pool2DLayer::no_first_max;
        for (int k = size * size; k-- > 0;) {
          const auto hit = load_lanes<V>(first + ((k / size) * g.in_w + k % size) * L) == acc;
          chosen = hit ? Ints{} + k : chosen;
        }
        if (relu_input) chosen = acc > V{} * 0.0f ? chosen : Ints{} + Pool2DLayer::no_first_max;
        store_lane_bytes<V>(first_max + (oh * g.out_w + ow) * L, chosen);
      }
    }
  }
}

// Max pooling's gradient goes to the first input in each window that equals the window's output,
// found again here: the forward pass records the first maxima only for a conv's weight gradient
// (first_maxima), which then runs in place of this.
// `assign`: the windows tile the input exactly, so every input element is written once, not added
// to.
// `relu_input`: the input is a ReLU's output, and a window whose maximum is not positive passes no
// gradient (the ReLU's derivative at its maximum is 0).
template <class V, bool max_mode, bool assign, int fixed = 0>
void pool_plane_backward(const float* x, const float* y, const float* dy, float* dx,
                         const PlaneGeometry& g, int size, int stride, bool relu_input) {
  if constexpr (fixed > 0) size = stride = fixed;
  constexpr std::int64_t L = lane_count<V>();
  const float inv_area = 1.0f / static_cast<float>(size * size);
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      const std::int64_t first = ((oh * stride) * g.in_w + ow * stride) * L;
      const V y_at = load_lanes<V>(y + (oh * g.out_w + ow) * L);
      const V dy_at = load_lanes<V>(dy + (oh * g.out_w + ow) * L);
      const V zero = dy_at * 0.0f;
      // The first match takes the gradient and leaves zero for the rest.
      V remaining = relu_input ? (y_at > zero ? dy_at : zero) : dy_at;
      for (int kh = 0; kh < size; ++kh)
        for (int kw = 0; kw < size; ++kw) {
          const std::int64_t at = first + (kh * g.in_w + kw) * L;
          V share = dy_at * inv_area;
          if constexpr (max_mode) {
            const auto hit = load_lanes<V>(x + at) == y_at;
            share = hit ? remaining : zero;
            remaining = hit ? zero : remaining;
          }
          if constexpr (assign)
            store_lanes(dx + at, share);
          else
            store_lanes(dx + at, load_lanes<V>(dx + at) + share);
        }
    }
  }
}

template <class V>
void backward_planes(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor& grad_in,
                     const PlaneGeometry& g, int size, int stride, bool max_mode, bool assign,
                     bool relu_input) {
  auto plane =
      max_mode
          ? (assign ? pool_plane_backward<V, true, true> : pool_plane_backward<V, true, false>)
          : (assign ? pool_plane_backward<V, false, true> : pool_plane_backward<V, false, false>);
  if (max_mode && assign && size == 2 && stride == 2) plane = pool_plane_backward<V, true, true, 2>;
  const std::int64_t in_plane = g.in_h * g.in_w * g.lanes, out_plane = g.out_h * g.out_w * g.lanes;
  for (std::int64_t p = 0; p < g.planes; ++p)
    plane(in.data() + p * in_plane, out.data() + p * out_plane, grad_out.data() + p * out_plane,
          grad_in.data() + p * in_plane, g, size, stride, relu_input);
}

template <class V>
void forward_planes(const Tensor& in, float* out, std::uint8_t* first_max, const PlaneGeometry& g,
                    int size, int stride, bool max_mode, bool relu_input) {
  auto plane = max_mode ? pool_plane_forward<V, true> : pool_plane_forward<V, false>;
  if (max_mode && size == 2 && stride == 2) plane = pool_plane_forward<V, true, 2>;
  const std::int64_t in_plane = g.in_h * g.in_w * g.lanes, out_plane = g.out_h * g.out_w * g.lanes;
  for (std::int64_t p = 0; p < g.planes; ++p)
    plane(in.data() + p * in_plane, out + p * out_plane,
          first_max != nullptr ? first_max + p * out_plane : nullptr, g, size, stride, relu_input);
}

}  // namespace

Pool2DLayer::Pool2DLayer(std::string name, Mode mode, int size, int stride)
    : Layer(std::move(name)), mode_(mode), size_(size), stride_(stride) {}

Shape Pool2DLayer::build(const Shape& input_shape) {
  if (input_shape.size() != 3)
    throw std::invalid_argument(fmt::format("layer {}: pooling needs a [C,H,W] input, got {}",
                                            name(), shape_string(input_shape)));
  channels_ = input_shape[0];
  in_h_ = input_shape[1];
  in_w_ = input_shape[2];
  if (in_h_ < size_ || in_w_ < size_)
    throw std::invalid_argument(fmt::format("layer {}: window {} is larger than the input {}x{}",
                                            name(), size_, in_h_, in_w_));
  out_h_ = (in_h_ - size_) / stride_ + 1;
  out_w_ = (in_w_ - size_) / stride_ + 1;
  return {channels_, out_h_, out_w_};
}

std::optional<MaxPoolWindows> Pool2DLayer::max_windows() const {
  if (mode_ != Mode::max || size_ * size_ >= no_first_max) return std::nullopt;
  return MaxPoolWindows{size_, stride_, out_h_, out_w_};
}

void Pool2DLayer::forward(const Tensor& in, Tensor& out, bool training) {
  forward_slice(in, out, 0, in.dim(0), training);
}

void Pool2DLayer::forward_slice(const Tensor& in, Tensor& out, std::int64_t first_sample,
                                std::int64_t batch, bool training) {
  const bool max_mode = mode_ == Mode::max;
  if (first_sample == 0) begin_output(out, batch, in.layout(), training);
  if (in.layout() != out.layout() || first_sample < 0 || first_sample + in.dim(0) > out.dim(0))
    throw std::logic_error(fmt::format(
        "layer {}: a slice of samples {}-{} does not fit the batch of {} begun in its layout",
        name(), first_sample, first_sample + in.dim(0), out.dim(0)));
  const PlaneGeometry g = geometry(in, out_h_, out_w_);
  const std::int64_t offset = first_sample * channels_ * out_h_ * out_w_;
  std::uint8_t* first_max = first_maxima_.empty() ? nullptr : first_maxima_.data() + offset;
  float* y = out.data() + offset;
  const bool relu_input = max_mode && relu_input_;
  if (g.lanes == 16)
    forward_planes<Lanes16>(in, y, first_max, g, size_, stride_, max_mode, relu_input);
  else if (g.lanes == 8)
    forward_planes<Lanes8>(in, y, first_max, g, size_, stride_, max_mode, relu_input);
  else
    forward_planes<float>(in, y, first_max, g, size_, stride_, max_mode, relu_input);
}

Pool2DLayer::Output Pool2DLayer::begin_output(Tensor& out, std::int64_t batch, Layout layout,
                                              bool training) {
  out.resize({batch, channels_, out_h_, out_w_}, layout);
  if (mode_ == Mode::max && training && record_first_maxima_)
    first_maxima_.resize(static_cast<std::size_t>(out.size()));
  else
    first_maxima_.clear();  // a backward pass after this one has no choices to read
  return {out.data(), first_maxima_.empty() ? nullptr : first_maxima_.data()};
}

void Pool2DLayer::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                           Tensor* grad_in) {
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape(), in.layout());
  const bool tiles_exactly = stride_ == size_ && out_h_ * size_ == in_h_ && out_w_ * size_ == in_w_;
  if (!tiles_exactly) grad_in->fill(0.0f);
  const PlaneGeometry g = geometry(in, out_h_, out_w_);
  const bool max_mode = mode_ == Mode::max;
  const bool relu_input = max_mode && relu_input_;
  if (g.lanes == 16)
    backward_planes<Lanes16>(in, out, grad_out, *grad_in, g, size_, stride_, max_mode,
                             tiles_exactly, relu_input);
  else if (g.lanes == 8)
    backward_planes<Lanes8>(in, out, grad_out, *grad_in, g, size_, stride_, max_mode, tiles_exactly,
                            relu_input);
  else
    backward_planes<float>(in, out, grad_out, *grad_in, g, size_, stride_, max_mode, tiles_exactly,
                           relu_input);
}

}  // namespace strata
