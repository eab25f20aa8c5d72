#include "core/conv_weight_grad.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace strata {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

ConvWeightGradient::ConvWeightGradient(const ConvGeometry& g, const memory::desc& x_desc,
                                       const memory::desc& dy_desc, const dnnl::engine& engine) {
  // Output position kh reads input row oh * stride + kh - padding for each tap oh of the output
  // gradient: a stride-1 convolution whose taps lie `stride` apart, and whose right padding makes
  // exactly `kernel` outputs (less than the left one where the forward pass left input unread).
  const memory::dims strides{1, 1}, dilates{g.stride - 1, g.stride - 1},
      pad_l{g.padding, g.padding},
      pad_r{g.kernel + (g.out_h - 1) * g.stride - g.in_h - g.padding,
            g.kernel + (g.out_w - 1) * g.stride - g.in_w - g.padding};
  const memory::desc src_any({g.channels, g.batch, g.in_h, g.in_w}, dt::f32, tag::any),
      kernel_any({g.filters, g.batch, g.out_h, g.out_w}, dt::f32, tag::any),
      dst_any({g.channels, g.filters, g.kernel, g.kernel}, dt::f32, tag::any);
  try {
    pd_ = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src_any, kernel_any,
                                        dst_any, strides, dilates, pad_l, pad_r),
        engine);
  } catch (const dnnl::error&) {
    return;  // no implementation for these shapes (a negative right padding): fast_ stays false
  }
  const std::string kernel = pd_.impl_info_str();
  if (kernel.rfind("ref", 0) == 0 || kernel.rfind("gemm", 0) == 0) return;
  fast_ = true;
  forward_ = dnnl::convolution_forward(pd_);
  const std::vector<int> swap{1, 0, 2, 3};
  x_swapped_ = x_desc.permute_axes(swap);
  dy_swapped_ = dy_desc.permute_axes(swap);
  dw_swapped_ = memory::desc({g.filters, g.channels, g.kernel, g.kernel}, dt::f32, tag::oihw)
                    .permute_axes(swap);
  src_ = memory(pd_.src_desc(), engine);
  kernel_ = memory(pd_.weights_desc(), engine);
  dst_ = memory(pd_.dst_desc(), engine);
  to_src_ =
      dnnl::reorder(dnnl::reorder::primitive_desc(engine, x_swapped_, engine, pd_.src_desc()));
  to_kernel_ =
      dnnl::reorder(dnnl::reorder::primitive_desc(engine, dy_swapped_, engine, pd_.weights_desc()));
  from_dst_ =
      dnnl::reorder(dnnl::reorder::primitive_desc(engine, pd_.dst_desc(), engine, dw_swapped_));
}

void ConvWeightGradient::compute(const float* x, const float* dy, float* dw, dnnl::stream& stream) {
  const dnnl::engine engine = stream.get_engine();
  memory x_user(x_swapped_, engine, const_cast<float*>(x));
  memory dy_user(dy_swapped_, engine, const_cast<float*>(dy));
  memory dw_user(dw_swapped_, engine, dw);
  to_src_.execute(stream, {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, src_}});
  to_kernel_.execute(stream, {{DNNL_ARG_FROM, dy_user}, {DNNL_ARG_TO, kernel_}});
  forward_.execute(stream,
                   {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, kernel_}, {DNNL_ARG_DST, dst_}});
  from_dst_.execute(stream, {{DNNL_ARG_FROM, dst_}, {DNNL_ARG_TO, dw_user}});
  stream.wait();
}

namespace {

// L lanes known at compile time, so that the sums stay in registers.
template <std::int64_t L>
void bias_gradient(const float* dy, std::int64_t batch, std::int64_t filters, std::int64_t plane,
                   float* db) {
  const std::int64_t blocks = filters / L;
  for (std::int64_t b = 0; b < blocks; ++b) {
    float sums[L] = {};
    for (std::int64_t n = 0; n < batch; ++n) {
      const float* block = dy + (n * blocks + b) * plane * L;
      for (std::int64_t p = 0; p < plane; ++p)
        for (std::int64_t lane = 0; lane < L; ++lane) sums[lane] += block[p * L + lane];
    }
    for (std::int64_t lane = 0; lane < L; ++lane) db[b * L + lane] = sums[lane];
  }
}

}  // namespace

void conv_bias_gradient(const float* dy, std::int64_t batch, std::int64_t filters,
                        std::int64_t plane, std::int64_t lanes, float* db) {
  switch (lanes) {
    case 1:
      return bias_gradient<1>(dy, batch, filters, plane, db);
    case 8:
      return bias_gradient<8>(dy, batch, filters, plane, db);
    case 16:
      return bias_gradient<16>(dy, batch, filters, plane, db);
    default:
      throw std::invalid_argument("conv_bias_gradient: channel blocks of " + std::to_string(lanes));
  }
}

}  // namespace strata
