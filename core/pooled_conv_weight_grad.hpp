// A convolution's weight and bias gradients taken straight from the max pooling after it, for a
// conv whose input gradient nothing needs (the first trainable layer).
#pragma once

#include <cstdint>
#include <vector>

#include "core/channel_lanes.hpp"
#include "core/conv_geometry.hpp"
#include "core/tensor.hpp"

namespace strata {

// Max pooling hands each window's gradient to one conv output, the window's first maximum (none
// where a fused ReLU's maximum is not positive: Pool2DLayer::first_maxima), so the conv's output
// gradient is zero in at least three of every four places of a 2x2 pooling. The pooling's backward
// pass would write that gradient whole, and the conv's weight gradient read it whole again (and
// reorder it on AVX2); here each pooled gradient goes straight into the weight gradient as its
// window's input taps times that value: dw[f][c][kh][kw] += g * x[c][oh*s+kh-p][ow*s+kw-p] at the
// chosen (oh, ow). The multiply-adds are those of the zero-free quarter only, and no output-sized
// gradient is written. Any input and output layout; windows may overlap or leave outputs out.
class PooledConvWeightGradient {
 public:
  // g.batch is not used: each call gives its own batch.
  PooledConvWeightGradient(const ConvGeometry& g, const MaxPoolWindows& pool);
  // x: the conv's input; first_max, pooled_grad: the pooling's first-maximum index of each of its
  // outputs (Pool2DLayer::first_maxima, whose no_first_max passes nothing) and their gradients,
  // both in the conv output's layout y_layout. Writes dw [filters, channels, kernel, kernel] plain
  // and db [filters].
  void compute(std::int64_t batch, const float* x, Layout x_layout, const std::uint8_t* first_max,
               const float* pooled_grad, Layout y_layout, float* dw, float* db);

 private:
  template <class V>
  void choose_outputs(const std::uint8_t* first_max, const float* pooled_grad, float* db);
  void copy_padded_input(const float* x, Layout x_layout);
  void accumulate(std::int64_t filter, std::int64_t filters, std::int64_t lanes, std::int64_t lane);

  ConvGeometry g_;
  MaxPoolWindows pool_;
  std::int64_t padded_w_;        // the padded input's row length, room for a chunk's overread
  std::vector<float> padded_x_;  // one sample's input [channel][row][column], zero-padded
  // Each 8-float chunk of each (channel, kernel row): its offset in padded_x_ from a window's tap.
  std::vector<std::int64_t> chunks_;
  // Per window and lane: the chosen output's gradient and its first tap's offset in padded_x_.
  std::vector<float> chosen_grad_;
  std::vector<std::int32_t> chosen_at_;
  std::vector<Lanes8> sums_;  // [filter][chunk]
};

}  // namespace strata
