// The sizes of one convolution: what its gradient paths are built for.
#pragma once

#include <cstdint>

namespace strata {

struct ConvGeometry {
  std::int64_t batch, channels, in_h, in_w, filters, kernel, stride, padding, out_h, out_w;
};

}  // namespace strata
