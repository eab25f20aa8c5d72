// A convolution's weight gradient as one forward convolution (on AVX2 oneDNN runs that faster
// than its backward-weights kernel), and its bias gradient.
#pragma once

#include <dnnl.hpp>

#include <cstdint>

#include "core/conv_geometry.hpp"

namespace strata {

// dw[f][c][kh][kw] = sum over n, oh, ow of x[n][c][oh*s+kh-p][ow*s+kw-p] * dy[n][f][oh][ow] is a
// forward convolution of the input with batch and channels swapped ([c][n][h][w]) by the output
// gradient as its weights ([f][n][oh][ow], dilated by the stride), whose output is dw with filters
// and channels swapped. On AVX2 oneDNN's forward kernel ran the benchmark CNN's shapes 20-25%
// faster than its backward-weights kernel (AVX-512's by 5-25% on the second conv), and it does not
// pad an image's 1 or 3 channels to a whole block of 8, which AVX2's backward-weights kernel does
// (8 times the work); it pads the batch instead, where that is not a multiple of the block. Its
// kernel spans the output's whole plane, so on a plain input that AVX-512's backward-weights kernel
// reads as it is, that kernel is faster (the layer chooses).
class ConvWeightGradient {
 public:
  // x_desc, dy_desc: the layouts the input and the output gradient arrive in.
  ConvWeightGradient(const ConvGeometry& g, const dnnl::memory::desc& x_desc,
                     const dnnl::memory::desc& dy_desc, const dnnl::engine& engine);
  // False where oneDNN has no direct forward kernel for the swapped shapes: none at all where the
  // right padding is negative (a stride that leaves the input's last rows unread), or only its
  // reference or gemm-based ones (slower than its backward-weights kernel). The caller then uses
  // the backward-weights primitive.
  bool fast() const { return fast_; }
  // dw: [filters, channels, kernel, kernel] plain. Waits for the stream.
  void compute(const float* x, const float* dy, float* dw, dnnl::stream& stream);

 private:
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward forward_;
  bool fast_ = false;
  dnnl::memory::desc x_swapped_, dy_swapped_, dw_swapped_;  // the callers' buffers, axes swapped
  dnnl::memory src_, kernel_, dst_;                         // in the primitive's layouts
  dnnl::reorder to_src_, to_kernel_, from_dst_;
};

// db[f] = sum over n and the output plane of dy; `lanes` is the layout's channel block (1 for
// plain, 8 or 16 for blocked, which needs filters a multiple of it).
void conv_bias_gradient(const float* dy, std::int64_t batch, std::int64_t filters,
                        std::int64_t plane, std::int64_t lanes, float* db);

}  // namespace strata
