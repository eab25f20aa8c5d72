#include "core/conv_relu_max_pool.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/channel_lanes.hpp"
#include "core/pool_layers.hpp"

namespace strata {

namespace {

// Where one strip's operands lie: the input plane's top-left element for the strip's first conv
// output, the strides of its rows and channels, and the block's weights [C][K][K][lanes].
struct StripInput {
  const float* x;
  std::int64_t row_stride, channel_stride;
  const float* weights;
  std::int64_t channels, kernel;
};

// The P 2x2 windows of a strip's accumulators (2 conv output rows by 2 * P columns, bias added)
// pooled and stored: the maximum in Pool2DLayer's order (row-major over the window, strict >, so
// the first of tied maxima stays), through the ReLU.
template <class V, int P>
void store_pooled(const V (&acc)[2][2 * P], float* pooled, std::uint8_t* first_maxima) {
  constexpr std::int64_t L = lane_count<V>();
  using Ints = LaneInts<V>;
  const V zero = acc[0][0] * 0.0f;
  for (int p = 0; p < P; ++p) {
    const V window[4] = {acc[0][2 * p], acc[0][2 * p + 1], acc[1][2 * p], acc[1][2 * p + 1]};
    V top = window[0];
    Ints chosen = Ints{};
    for (int k = 1; k < 4; ++k) {
      const auto higher = window[k] > top;
      top = higher ? window[k] : top;
      chosen = higher ? Ints{} + k : chosen;
    }
    // Not (top > 0 ? top : 0): a NaN passes on, as it would through the ReLU and the pooling.
    store_lanes(pooled + p * L, top < zero ? zero : top);
    if (first_maxima == nullptr) continue;
    chosen = top > zero ? chosen : Ints{} + Pool2DLayer::no_first_max;
    store_lane_bytes<V>(first_maxima + p * L, chosen);
  }
}

// Any channel count and kernel size: tap by tap, each tap's weights loaded once and each input
// broadcast for every tap that reads it.
template <class V, int P>
void strip_any_kernel(const StripInput& s, V bias, float* pooled, std::uint8_t* first_maxima) {
  constexpr std::int64_t L = lane_count<V>();
  V acc[2][2 * P];
  for (auto& row : acc)
    for (V& a : row) a = bias;
  const float* w = s.weights;
  for (std::int64_t c = 0; c < s.channels; ++c)
    for (std::int64_t kh = 0; kh < s.kernel; ++kh)
      for (std::int64_t kw = 0; kw < s.kernel; ++kw, w += L) {
        const V tap = load_lanes<V>(w);
        const float* x = s.x + c * s.channel_stride + kh * s.row_stride + kw;
        for (int r = 0; r < 2; ++r)
          for (int col = 0; col < 2 * P; ++col) acc[r][col] += x[r * s.row_stride + col] * tap;
      }
  store_pooled<V, P>(acc, pooled, first_maxima);
}

// One input channel and a K x K kernel known here: input by input, each broadcast once for all
// the accumulators it reaches, the weights read as memory operands. Broadcasts cost more than
// loads on the AVX-512 cores measured: on the benchmark CNN's first conv this ran 126-137 us for
// 32 samples (hot caches, no first maxima) against 172-177 us tap by tap.
template <class V, int P, int K>
void strip_one_channel(const StripInput& s, V bias, float* pooled, std::uint8_t* first_maxima) {
  constexpr std::int64_t L = lane_count<V>();
  constexpr int cols = 2 * P;
  V acc[2][cols];
  for (auto& row : acc)
    for (V& a : row) a = bias;
#pragma GCC unroll 16
  for (int ir = 0; ir < K + 1; ++ir)
#pragma GCC unroll 16
    for (int ic = 0; ic < cols + K - 1; ++ic) {
      const float x = s.x[ir * s.row_stride + ic];
#pragma GCC unroll 2
      for (int r = 0; r < 2; ++r) {
        const int kh = ir - r;
        if (kh < 0 || kh >= K) continue;
#pragma GCC unroll 8
        for (int col = 0; col < cols; ++col) {
          const int kw = ic - col;
          if (kw < 0 || kw >= K) continue;
          acc[r][col] += x * load_lanes<V>(s.weights + (kh * K + kw) * L);
        }
      }
    }
  store_pooled<V, P>(acc, pooled, first_maxima);
}

// 2 conv output rows by 2 * P columns for one block of filters, then their P windows pooled: the
// accumulators stay in registers (16 vectors at P = 4) and only the pooled values leave.
template <class V, int P>
void pooled_strip(const StripInput& s, V bias, float* pooled, std::uint8_t* first_maxima) {
  if (s.channels == 1 && s.kernel == 5)
    strip_one_channel<V, P, 5>(s, bias, pooled, first_maxima);
  else if (s.channels == 1 && s.kernel == 3)
    strip_one_channel<V, P, 3>(s, bias, pooled, first_maxima);
  else
    strip_any_kernel<V, P>(s, bias, pooled, first_maxima);
}

// Strips of the widest P the registers hold (P_max), then one narrower strip for the rest of the
// row's windows.
template <class V, int P_max>
void pooled_row(StripInput s, std::int64_t windows, V bias, float* pooled,
                std::uint8_t* first_maxima) {
  constexpr std::int64_t L = lane_count<V>();
  std::int64_t pw = 0;
  const auto advance = [&](int p) {
    pw += p;
    s.x += 2 * p;
  };
  for (; pw + P_max <= windows; advance(P_max))
    pooled_strip<V, P_max>(s, bias, pooled + pw * L,
                           first_maxima ? first_maxima + pw * L : nullptr);
  const auto rest = windows - pw;
  std::uint8_t* fm = first_maxima ? first_maxima + pw * L : nullptr;
  if (rest == 1) pooled_strip<V, 1>(s, bias, pooled + pw * L, fm);
  if constexpr (P_max > 2)
    if (rest == 2) pooled_strip<V, 2>(s, bias, pooled + pw * L, fm);
  if constexpr (P_max > 3)
    if (rest == 3) pooled_strip<V, 3>(s, bias, pooled + pw * L, fm);
}

// One sample's planes (`x`: C planes of in_w columns) into its pooled output.
template <class V, int P_max>
void pooled_sample(const float* x, std::int64_t in_w, std::int64_t plane, const ConvGeometry& g,
                   const MaxPoolWindows& w, const float* blocked_weights, const float* bias,
                   float* pooled, std::uint8_t* first_maxima) {
  constexpr std::int64_t L = lane_count<V>();
  const std::int64_t taps = g.channels * g.kernel * g.kernel;
  for (std::int64_t block = 0; block < g.filters / L; ++block) {
    const V block_bias = load_lanes<V>(bias + block * L);
    for (std::int64_t ph = 0; ph < w.out_h; ++ph) {
      const StripInput s{x + 2 * ph * in_w, in_w,    plane, blocked_weights + block * taps * L,
                         g.channels,        g.kernel};
      const std::int64_t at = (block * w.out_h + ph) * w.out_w * L;
      pooled_row<V, P_max>(s, w.out_w, block_bias, pooled + at,
                           first_maxima ? first_maxima + at : nullptr);
    }
  }
}

}  // namespace

bool ConvReluMaxPool::fits(const ConvGeometry& conv, const MaxPoolWindows& pooling,
                           std::int64_t lanes) {
  return (lanes == 8 || lanes == 16) && conv.stride == 1 && conv.channels >= 1 &&
         conv.channels <= max_channels && conv.filters % lanes == 0 && pooling.size == 2 &&
         pooling.stride == 2 && pooling.out_h >= 1 && pooling.out_w >= 1 &&
         2 * pooling.out_h <= conv.out_h && 2 * pooling.out_w <= conv.out_w;
}

ConvReluMaxPool::ConvReluMaxPool(const ConvGeometry& conv, const MaxPoolWindows& pooling,
                                 Layout layout)
    : conv_(conv), pooling_(pooling), layout_(layout), lanes_(channel_block(layout)) {
  const std::int64_t lanes = lanes_;
  if (!fits(conv, pooling, lanes))
    throw std::invalid_argument(fmt::format(
        "conv {}x{} stride {} on {} channels to {} filters, then a {}x{} pooling of stride {}: "
        "not one the fused conv, ReLU and max pooling kernel runs in blocks of {}",
        conv.kernel, conv.kernel, conv.stride, conv.channels, conv.filters, pooling.size,
        pooling.size, pooling.stride, lanes));
  blocked_weights_.resize(
      static_cast<std::size_t>(conv.filters * conv.channels * conv.kernel * conv.kernel));
  if (conv.padding > 0)
    padded_.assign(static_cast<std::size_t>(conv.channels * (conv.in_h + 2 * conv.padding) *
                                            (conv.in_w + 2 * conv.padding)),
                   0.0f);
}

void ConvReluMaxPool::compute(std::int64_t batch, const float* in, const float* weight,
                              const float* bias, float* pooled, std::uint8_t* first_maxima) {
  const ConvGeometry& g = conv_;
  // The weights change every step; blocking them costs F * C * K * K moves.
  const std::int64_t taps = g.channels * g.kernel * g.kernel;
  for (std::int64_t f = 0; f < g.filters; ++f)
    for (std::int64_t t = 0; t < taps; ++t)
      blocked_weights_[static_cast<std::size_t>(((f / lanes_) * taps + t) * lanes_ + f % lanes_)] =
          weight[f * taps + t];
  const std::int64_t pad = g.padding, in_plane = g.in_h * g.in_w;
  const std::int64_t padded_w = g.in_w + 2 * pad, padded_plane = (g.in_h + 2 * pad) * padded_w;
  const std::int64_t pooled_sample_size = g.filters * pooling_.out_h * pooling_.out_w;
  for (std::int64_t n = 0; n < batch; ++n) {
    const float* x = in + n * g.channels * in_plane;
    if (pad > 0) {
      // Only the interior is written; the border stays the zeros it was made with.
      for (std::int64_t c = 0; c < g.channels; ++c)
        for (std::int64_t h = 0; h < g.in_h; ++h)
          std::copy_n(x + c * in_plane + h * g.in_w, g.in_w,
                      padded_.data() + c * padded_plane + (h + pad) * padded_w + pad);
      x = padded_.data();
    }
    float* y = pooled + n * pooled_sample_size;
    std::uint8_t* fm = first_maxima ? first_maxima + n * pooled_sample_size : nullptr;
    if (lanes_ == 16)
      pooled_sample<Lanes16, 4>(x, padded_w, padded_plane, g, pooling_, blocked_weights_.data(),
                                bias, y, fm);
    else
      pooled_sample<Lanes8, 2>(x, padded_w, padded_plane, g, pooling_, blocked_weights_.data(),
                               bias, y, fm);
  }
}

}  // namespace strata
