// The sizes of one convolution and of a max pooling after it: what its gradient paths are built
// for.
#pragma once

#include <cstdint>

namespace strata {

struct ConvGeometry {
  std::int64_t batch, channels, in_h, in_w, filters, kernel, stride, padding, out_h, out_w;
};

// A max pooling's windows over the conv's output plane.
struct MaxPoolWindows {
  std::int64_t size, stride, out_h, out_w;
};

}  // namespace strata
