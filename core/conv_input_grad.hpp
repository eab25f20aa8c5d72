// A convolution's input gradient as one matrix multiply per tile of whole samples and a
// scatter-add of its columns (col2im), where that beats oneDNN's backward-data kernel.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/conv_geometry.hpp"
#include "core/tensor.hpp"

namespace strata {

// dx[n][c][ih][iw] = sum over f, kh, kw of w[f][c][kh][kw] * dy[n][f][oh][ow] where
// ih = oh*s + kh - p and iw = ow*s + kw - p. With the output gradient as rows [n][oh][ow] of F
// values and the weights as [f][kh][kw][c], one row of dy times the weights gives that output
// position's contribution to every tap of its window, C contiguous values per tap, which are added
// into dx. On the 2-core AVX2 machine this ran the benchmark CNN's second conv in 2.9-3.5 ms per
// 32 samples against 3.2-4.1 for oneDNN 2.6's jit:avx2 backward-data kernel in the same runs
// (55-65% of the sgemm rate there); on AVX-512 that kernel ran at 95% of it, so there the layer
// keeps it.
class ConvInputGradient {
 public:
  // The columns of whole samples up to this size are multiplied at once: for the benchmark CNN's
  // second conv 2 MiB ran faster than 0.5 MiB (a smaller multiply) and as fast as 8 MiB.
  static constexpr std::int64_t default_tile_bytes = std::int64_t{1} << 21;

  // dy_layout, dx_layout: the layouts the output gradient arrives in and the input gradient is
  // written in (the input's). A tile holds at least one sample, whatever `tile_bytes`. Throws
  // std::invalid_argument where the channels or filters do not fill their layout's blocks.
  ConvInputGradient(const ConvGeometry& g, Layout dy_layout, Layout dx_layout,
                    const dnnl::engine& engine, std::int64_t tile_bytes = default_tile_bytes);
  // dy: [batch, filters, out_h, out_w]; w: [filters, channels, kernel, kernel] plain; dx: [batch,
  // channels, in_h, in_w], overwritten. Waits for the stream. The buffers are allocated at the
  // first call.
  void compute(const float* dy, const float* w, float* dx, dnnl::stream& stream);

 private:
  // Adds `samples` samples' columns into their dx.
  void scatter(std::int64_t samples, float* dx) const;

  ConvGeometry g_;
  Layout dx_layout_;
  std::int64_t row_length_, tile_samples_;  // columns per output position; samples per tile
  dnnl::memory::desc dy_desc_, dy_rows_desc_;
  dnnl::reorder to_rows_;
  std::vector<float> dy_rows_, taps_, columns_;
};

// Whether a layer uses ConvInputGradient in place of oneDNN's backward-data primitive, whose
// implementation is named `kernel`, for an input in `input_layout`.
bool input_gradient_by_gemm(const std::string& kernel, Layout input_layout);

}  // namespace strata
