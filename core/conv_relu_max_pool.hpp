// A conv's forward pass with its fused ReLU and the 2x2 max pooling after it, as one kernel that
// writes only the pooled values (and the pooling's first maxima): the first conv of a CNN.
#pragma once

#include <cstdint>
#include <vector>

#include "core/conv_geometry.hpp"
#include "core/tensor.hpp"

namespace strata {

// For a conv on a plain input of few channels, oneDNN's forward kernel runs at a fraction of the
// sgemm rate, writes an output 4 times the pooled one, and the pooling then reads it back. Here
// a strip of 2 output rows by up to 8 columns of one block of filters is summed in registers and
// pooled there: on the benchmark CNN's first conv (1 -> 32 channels, 5x5, 28x28) 0.145 ms for 32
// samples against 0.243 ms for oneDNN's conv and the pooling apart, 0.585 against 1.315 ms for 128
// (strata_bench_pooled_conv_gradient).
class ConvReluMaxPool {
 public:
  // Channels beyond this make the conv a GEMM-shaped problem that oneDNN's kernels run well.
  static constexpr std::int64_t max_channels = 4;
  // Whether this kernel runs the conv (stride 1, any kernel size and padding, at most
  // max_channels plain input channels, filters in whole blocks of `lanes`, 8 or 16) and a max
  // pooling with these windows (2x2, stride 2).
  static bool fits(const ConvGeometry& conv, const MaxPoolWindows& pooling, std::int64_t lanes);
  // `layout`: the pooled output's, channel_blocked8 or channel_blocked16. Throws
  // std::invalid_argument where fits() is false for its block.
  ConvReluMaxPool(const ConvGeometry& conv, const MaxPoolWindows& pooling, Layout layout);

  // in: plain [batch, C, H, W]; weight [F, C, K, K] and bias [F], the conv's own. Writes
  // max(0, the largest of each window's conv outputs) to pooled, [batch, F, PH, PW] in blocks of
  // `lanes` channels (nChw16c or nChw8c). Where first_maxima is not null, also writes there, in
  // the same layout, Pool2DLayer::first_maxima's choice for a ReLU input: the first window input
  // (row-major) that equals the maximum, or Pool2DLayer::no_first_max where the maximum is not
  // positive (or a NaN).
  void compute(std::int64_t batch, const float* in, const float* weight, const float* bias,
               float* pooled, std::uint8_t* first_maxima);
  Layout layout() const { return layout_; }

 private:
  ConvGeometry conv_;
  MaxPoolWindows pooling_;
  Layout layout_;
  std::int64_t lanes_;                  // channel_block(layout_)
  std::vector<float> blocked_weights_;  // [F / lanes][C][K][K][lanes]
  std::vector<float> padded_;           // one sample's input with its zero border
};

}  // namespace strata
