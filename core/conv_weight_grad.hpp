// The weight and bias gradients of a convolution whose input has few channels (an image's 1 or 3),
// from a plain input and a channel-blocked output gradient. oneDNN's CPU kernels for that case pad
// the input to a whole channel block (1 -> 8 channels on AVX2), and so do 8 times the work.
#pragma once

#include <cstdint>

namespace strata {

struct ConvGeometry {
  std::int64_t batch, channels, in_h, in_w, filters, kernel, stride, padding, out_h, out_w;
};

// x: [batch, channels, in_h, in_w] plain; dy: [batch, filters, out_h, out_w] in blocks of `lanes`
// channels (8 or 16; filters a multiple of it). Writes dw [filters, channels, kernel, kernel] and
// db [filters].
void few_channel_weight_grad(const float* x, const float* dy, const ConvGeometry& g,
                             std::int64_t lanes, float* dw, float* db);

}  // namespace strata
