// strata's activation layouts as oneDNN memory descriptors.
#pragma once

#include <dnnl.hpp>

#include <cstdint>

#include "core/tensor.hpp"

namespace strata {

inline dnnl::memory::desc activation_desc(std::int64_t n, std::int64_t c, std::int64_t h,
                                          std::int64_t w, Layout layout) {
  using tag = dnnl::memory::format_tag;
  const tag format = layout == Layout::channel_blocked16  ? tag::nChw16c
                     : layout == Layout::channel_blocked8 ? tag::nChw8c
                                                          : tag::nchw;
  return {{n, c, h, w}, dnnl::memory::data_type::f32, format};
}

}  // namespace strata
