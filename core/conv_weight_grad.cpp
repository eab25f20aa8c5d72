#include "core/conv_weight_grad.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

namespace {

// dw, [filters][channels][kernel][kernel] plain, as the convolution's output sees it.
memory::desc dw_swapped(const ConvGeometry& g) {
  return memory::desc({g.filters, g.channels, g.kernel, g.kernel}, dt::f32, tag::oihw)
      .permute_axes({1, 0, 2, 3});
}

// Floats from one sample to the next in a blocked layout whose batch is not split into blocks;
// 0 otherwise (the pieces then cannot be cut from the caller's buffer).
std::int64_t sample_stride(const memory::desc& d) {
  if (d.data.format_kind != dnnl_blocked) return 0;
  const auto& blocking = d.data.format_desc.blocking;
  for (int i = 0; i < blocking.inner_nblks; ++i)
    if (blocking.inner_idxs[i] == 0) return 0;
  return blocking.strides[0];
}

}  // namespace

std::int64_t ConvWeightGradient::default_piece_samples(const ConvGeometry& g) {
  constexpr std::int64_t piece_bytes = std::int64_t{512} << 10;
  constexpr std::int64_t block = 16;
  const std::int64_t sample_bytes = (g.channels * g.in_h * g.in_w + g.filters * g.out_h * g.out_w) *
                                    static_cast<std::int64_t>(sizeof(float));
  return std::max(block, piece_bytes / sample_bytes / block * block);
}

ConvWeightGradient::ConvWeightGradient(const ConvGeometry& g, const memory::desc& x_desc,
                                       const memory::desc& dy_desc, const dnnl::engine& engine,
                                       std::int64_t piece_samples)
    : batch_(g.batch),
      piece_samples_(
          std::min(g.batch, piece_samples > 0 ? piece_samples : default_piece_samples(g))),
      x_sample_floats_(sample_stride(x_desc)),
      dy_sample_floats_(sample_stride(dy_desc)),
      dw_swapped_(dw_swapped(g)) {
  if (x_sample_floats_ == 0 || dy_sample_floats_ == 0) return;
  // The first piece writes the sum and, where more follow, has a twin that adds; the remainder's
  // piece comes last, so it only adds.
  if (!add_piece(g, piece_samples_, true, batch_ > piece_samples_, x_desc, dy_desc, engine)) return;
  const std::int64_t remainder = batch_ % piece_samples_;
  if (remainder != 0 && !add_piece(g, remainder, false, true, x_desc, dy_desc, engine)) return;
  fast_ = true;
}

bool ConvWeightGradient::add_piece(const ConvGeometry& g, std::int64_t samples, bool writes,
                                   bool adds, const memory::desc& x_desc,
                                   const memory::desc& dy_desc, const dnnl::engine& engine) {
  // Output position kh reads input row oh * stride + kh - padding for each tap oh of the output
  // gradient: a stride-1 convolution whose taps lie `stride` apart, and whose right padding makes
  // exactly `kernel` outputs (less than the left one where the forward pass left input unread).
  const memory::dims strides{1, 1}, dilates{g.stride - 1, g.stride - 1},
      pad_l{g.padding, g.padding},
      pad_r{g.kernel + (g.out_h - 1) * g.stride - g.in_h - g.padding,
            g.kernel + (g.out_w - 1) * g.stride - g.in_w - g.padding};
  const memory::desc src_any({g.channels, samples, g.in_h, g.in_w}, dt::f32, tag::any),
      kernel_any({g.filters, samples, g.out_h, g.out_w}, dt::f32, tag::any),
      dst_any({g.channels, g.filters, g.kernel, g.kernel}, dt::f32, tag::any);
  // Every piece sums into one buffer, so the pieces after the first take its layout.
  const memory::desc dst_md = pieces_.empty() ? dst_any : dst_.get_desc();
  const auto describe = [&](const memory::desc& src, const memory::desc& kernel,
                            const memory::desc& dst, const dnnl::primitive_attr& attr) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src, kernel, dst,
                                        strides, dilates, pad_l, pad_r),
        attr, engine);
  };
  const auto runs_fast = [](const dnnl::convolution_forward::primitive_desc& pd) {
    const std::string kernel = pd.impl_info_str();
    return kernel.rfind("ref", 0) != 0 && kernel.rfind("gemm", 0) != 0;
  };
  Piece piece;
  piece.samples = samples;
  try {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    dnnl::primitive_attr adding;
    adding.set_post_ops(sum);
    const auto layouts =
        describe(src_any, kernel_any, dst_md, writes ? dnnl::primitive_attr() : adding);
    if (!runs_fast(layouts)) return false;
    (writes ? piece.first : piece.accumulate) = dnnl::convolution_forward(layouts);
    if (writes && adds) {
      const auto accumulate =
          describe(layouts.src_desc(), layouts.weights_desc(), layouts.dst_desc(), adding);
      if (!runs_fast(accumulate)) return false;
      piece.accumulate = dnnl::convolution_forward(accumulate);
    }
    piece.src = memory(layouts.src_desc(), engine);
    piece.kernel = memory(layouts.weights_desc(), engine);
    if (pieces_.empty()) {
      dst_ = memory(layouts.dst_desc(), engine);
      from_dst_ = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine, layouts.dst_desc(), engine, dw_swapped_));
    }
    // The piece's samples lie together in the callers' buffers (the batch is outermost).
    const std::vector<int> swap{1, 0, 2, 3};
    piece.x_swapped = x_desc.submemory_desc({samples, g.channels, g.in_h, g.in_w}, {0, 0, 0, 0})
                          .permute_axes(swap);
    piece.dy_swapped = dy_desc.submemory_desc({samples, g.filters, g.out_h, g.out_w}, {0, 0, 0, 0})
                           .permute_axes(swap);
    piece.to_src = dnnl::reorder(
        dnnl::reorder::primitive_desc(engine, piece.x_swapped, engine, piece.src.get_desc()));
    piece.to_kernel = dnnl::reorder(
        dnnl::reorder::primitive_desc(engine, piece.dy_swapped, engine, piece.kernel.get_desc()));
  } catch (const dnnl::error&) {
    // No implementation for these shapes (a negative right padding), or a layout oneDNN cannot
    // cut into pieces of samples: the layer takes the backward-weights kernel.
    return false;
  }
  pieces_.push_back(std::move(piece));
  return true;
}

const ConvWeightGradient::Piece& ConvWeightGradient::piece_of(std::int64_t samples) const {
  return samples == pieces_.front().samples ? pieces_.front() : pieces_.back();
}

void ConvWeightGradient::compute(const float* x, const float* dy, float* dw, dnnl::stream& stream) {
  if (!fast_)
    throw std::logic_error(
        "ConvWeightGradient::compute: no fast kernel was built for these shapes");
  const dnnl::engine engine = stream.get_engine();
  for (std::int64_t n = 0; n < batch_; n += piece_samples_) {
    const Piece& piece = piece_of(std::min(piece_samples_, batch_ - n));
    memory x_user(piece.x_swapped, engine, const_cast<float*>(x + n * x_sample_floats_));
    memory dy_user(piece.dy_swapped, engine, const_cast<float*>(dy + n * dy_sample_floats_));
    piece.to_src.execute(stream, {{DNNL_ARG_FROM, x_user}, {DNNL_ARG_TO, piece.src}});
    piece.to_kernel.execute(stream, {{DNNL_ARG_FROM, dy_user}, {DNNL_ARG_TO, piece.kernel}});
    (n == 0 ? piece.first : piece.accumulate)
        .execute(
            stream,
            {{DNNL_ARG_SRC, piece.src}, {DNNL_ARG_WEIGHTS, piece.kernel}, {DNNL_ARG_DST, dst_}});
  }
  memory dw_user(dw_swapped_, engine, dw);
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
