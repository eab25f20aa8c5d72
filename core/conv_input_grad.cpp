#include "core/conv_input_grad.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "core/channel_lanes.hpp"
#include "core/dnnl_layout.hpp"
#include "core/gemm.hpp"

namespace strata {

namespace {

// The taps [first, last) of a window starting at input index `start` that fall inside [0, in).
std::pair<std::int64_t, std::int64_t> taps_inside(std::int64_t start, std::int64_t kernel,
                                                  std::int64_t in) {
  return {std::max<std::int64_t>(0, -start), std::min(kernel, in - start)};
}

// dx's `blocks` channel blocks at one input position (plane_size apart) += one tap's channels,
// four blocks to a step: as a plain loop over the blocks, GCC kept the counter in a vector register
// and the round trips made the scatter latency-bound (0.3 ms more per 32 samples of the benchmark
// CNN's second conv, 12% of its input gradient).
template <class Block, std::int64_t L>
inline void add_blocks(float* at, const float* taps, std::int64_t blocks, std::int64_t plane_size) {
  const auto add = [&](std::int64_t b) {
    float* to = at + b * plane_size;
    store_lanes(to, load_lanes<Block>(to) + load_lanes<Block>(taps + b * L));
  };
  std::int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) {
    add(b);
    add(b + 1);
    add(b + 2);
    add(b + 3);
  }
  for (; b < blocks; ++b) add(b);
}

// Adds `samples` samples' columns into dx: row (n, oh, ow) holds [kh][kw][c], its contribution to
// input position (oh*s + kh - p, ow*s + kw - p). A sample's dx is small enough to stay in L1 while
// its rows stream past in order. Channel c of input position (n, ih, iw) lies at
// ((n * blocks + c / L) * in_h + ih) * in_w * L + iw * L + c % L (for L = 1, plain NCHW).
template <std::int64_t L>
void scatter_samples(const ConvGeometry& g, const float* columns, std::int64_t samples, float* dx) {
  using Block = std::conditional_t<L == 16, Lanes16, std::conditional_t<L == 8, Lanes8, float>>;
  const std::int64_t k = g.kernel, channels = g.channels, blocks = channels / L;
  const std::int64_t row_length = k * k * channels, plane_size = g.in_h * g.in_w * L;
  const float* row = columns;
  for (std::int64_t n = 0; n < samples; ++n) {
    float* sample = dx + n * channels * g.in_h * g.in_w;
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      const std::int64_t top = oh * g.stride - g.padding;
      const auto [kh_first, kh_last] = taps_inside(top, k, g.in_h);
      for (std::int64_t ow = 0; ow < g.out_w; ++ow, row += row_length) {
        const std::int64_t left = ow * g.stride - g.padding;
        const auto [kw_first, kw_last] = taps_inside(left, k, g.in_w);
        for (std::int64_t kh = kh_first; kh < kh_last; ++kh) {
          // From the first tap inside: with left < 0 the window's start lies before dx.
          const std::int64_t line = ((top + kh) * g.in_w + left + kw_first) * L;
          const float* taps = row + (kh * k + kw_first) * channels;
          float* at = sample + line;
          for (std::int64_t kw = kw_first; kw < kw_last; ++kw, at += L, taps += channels)
            add_blocks<Block, L>(at, taps, blocks, plane_size);
        }
      }
    }
  }
}

}  // namespace

ConvInputGradient::ConvInputGradient(const ConvGeometry& g, Layout dy_layout, Layout dx_layout,
                                     const dnnl::engine& engine, std::int64_t tile_bytes)
    : g_(g),
      dx_layout_(dx_layout),
      row_length_(g.kernel * g.kernel * g.channels),
      dy_desc_(activation_desc(g.batch, g.filters, g.out_h, g.out_w, dy_layout)),
      dy_rows_desc_({g.batch, g.filters, g.out_h, g.out_w}, dnnl::memory::data_type::f32,
                    dnnl::memory::format_tag::nhwc),
      to_rows_(dnnl::reorder::primitive_desc(engine, dy_desc_, engine, dy_rows_desc_)) {
  if (g.channels % channel_block(dx_layout) != 0 || g.filters % channel_block(dy_layout) != 0)
    throw std::invalid_argument(fmt::format(
        "conv input gradient: {} channels and {} filters do not fill blocks of {} and {}",
        g.channels, g.filters, channel_block(dx_layout), channel_block(dy_layout)));
  const std::int64_t sample_bytes = 4 * g.out_h * g.out_w * row_length_;
  tile_samples_ = std::max<std::int64_t>(1, std::min(tile_bytes / sample_bytes, g.batch));
}

void ConvInputGradient::compute(const float* dy, const float* w, float* dx, dnnl::stream& stream) {
  // Allocated on first use: the layer makes one of these for every batch size it sees, evaluation's
  // too, which never runs backward.
  if (dy_rows_.empty()) {
    dy_rows_.resize(static_cast<std::size_t>(g_.batch * g_.filters * g_.out_h * g_.out_w));
    taps_.resize(static_cast<std::size_t>(g_.filters * row_length_));
    columns_.resize(static_cast<std::size_t>(tile_samples_ * g_.out_h * g_.out_w * row_length_));
  }
  const dnnl::engine engine = stream.get_engine();
  dnnl::memory dy_user(dy_desc_, engine, const_cast<float*>(dy));
  dnnl::memory dy_rows(dy_rows_desc_, engine, dy_rows_.data());
  to_rows_.execute(stream, {{DNNL_ARG_FROM, dy_user}, {DNNL_ARG_TO, dy_rows}});
  // [f][c][kh][kw] -> [f][kh][kw][c]: each tap's channels side by side, as dx holds them.
  const std::int64_t area = g_.kernel * g_.kernel;
  for (std::int64_t f = 0; f < g_.filters; ++f)
    for (std::int64_t c = 0; c < g_.channels; ++c)
      for (std::int64_t k = 0; k < area; ++k)
        taps_[static_cast<std::size_t>((f * area + k) * g_.channels + c)] =
            w[(f * g_.channels + c) * area + k];
  std::fill_n(dx, g_.batch * g_.channels * g_.in_h * g_.in_w, 0.0f);
  stream.wait();
  const std::int64_t plane = g_.out_h * g_.out_w, sample_size = g_.channels * g_.in_h * g_.in_w;
  for (std::int64_t first = 0; first < g_.batch; first += tile_samples_) {
    const std::int64_t samples = std::min(tile_samples_, g_.batch - first);
    sgemm(Transpose::no, Transpose::no, static_cast<int>(samples * plane),
          static_cast<int>(row_length_), static_cast<int>(g_.filters), 1.0f,
          dy_rows_.data() + first * plane * g_.filters, static_cast<int>(g_.filters), taps_.data(),
          static_cast<int>(row_length_), 0.0f, columns_.data(), static_cast<int>(row_length_));
    scatter(samples, dx + first * sample_size);
  }
}

void ConvInputGradient::scatter(std::int64_t samples, float* dx) const {
  switch (channel_block(dx_layout_)) {
    case 8:
      return scatter_samples<8>(g_, columns_.data(), samples, dx);
    case 16:
      return scatter_samples<16>(g_, columns_.data(), samples, dx);
    default:
      return scatter_samples<1>(g_, columns_.data(), samples, dx);
  }
}

bool input_gradient_by_gemm(const std::string& kernel, Layout input_layout) {
  return kernel == "jit:avx2" && input_layout != Layout::plain;
}

}  // namespace strata
