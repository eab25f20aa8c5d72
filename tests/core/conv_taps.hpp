// The direct sums that conv tests compare oneDNN and GEMM paths with: every (sample, filter,
// channel, tap, output position) whose input position lies inside the input.
#pragma once

#include <cstdint>

#include "core/conv_geometry.hpp"

namespace strata::testing {

// visit(n, f, c, kh, kw, oh, ow, ih, iw) for each tap that reads input (ih, iw) = (oh*s + kh - p,
// ow*s + kw - p) inside the input.
template <class Visit>
void for_each_tap(const ConvGeometry& g, Visit&& visit) {
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t f = 0; f < g.filters; ++f)
      for (std::int64_t c = 0; c < g.channels; ++c)
        for (std::int64_t kh = 0; kh < g.kernel; ++kh)
          for (std::int64_t kw = 0; kw < g.kernel; ++kw)
            for (std::int64_t oh = 0; oh < g.out_h; ++oh)
              for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
                const std::int64_t ih = oh * g.stride + kh - g.padding,
                                   iw = ow * g.stride + kw - g.padding;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                visit(n, f, c, kh, kw, oh, ow, ih, iw);
              }
}

// A geometry with its output size computed from the input, kernel, stride and padding.
inline ConvGeometry conv_geometry(std::int64_t batch, std::int64_t channels, std::int64_t in_h,
                                  std::int64_t in_w, std::int64_t filters, std::int64_t kernel,
                                  std::int64_t stride, std::int64_t padding) {
  return {batch,
          channels,
          in_h,
          in_w,
          filters,
          kernel,
          stride,
          padding,
          (in_h + 2 * padding - kernel) / stride + 1,
          (in_w + 2 * padding - kernel) / stride + 1};
}

}  // namespace strata::testing
