// A convolution's weight gradient as forward convolutions over pieces of the batch (on AVX2
// oneDNN runs that faster than its backward-weights kernel), and its bias gradient.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <vector>

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
//
// The batch is the convolution's reduction, and the kernel walks it for every output block: so
// the batch goes through in pieces whose swapped input and output gradient take about 512 KiB (one
// block of 16 samples at least), each piece's sum added to the last's (oneDNN's sum post-op).
class ConvWeightGradient {
 public:
  // x_desc, dy_desc: the layouts the input and the output gradient arrive in; fast() is false
  // unless the batch is their outermost dimension and not blocked (plain or channel-blocked).
  // piece_samples: samples per piece (the last may be smaller); 0 sizes pieces by
  // default_piece_samples.
  ConvWeightGradient(const ConvGeometry& g, const dnnl::memory::desc& x_desc,
                     const dnnl::memory::desc& dy_desc, const dnnl::engine& engine,
                     std::int64_t piece_samples = 0);
  // False where oneDNN has no direct forward kernel for the swapped shapes: none at all where the
  // right padding is negative (a stride that leaves the input's last rows unread), or only its
  // reference or gemm-based ones (slower than its backward-weights kernel). The caller then uses
  // the backward-weights primitive.
  bool fast() const { return fast_; }
  std::int64_t piece_samples() const { return piece_samples_; }
  // dw: [filters, channels, kernel, kernel] plain. Waits for the stream. Throws logic_error
  // unless fast().
  void compute(const float* x, const float* dy, float* dw, dnnl::stream& stream);

  // Samples a piece takes by default: as many as keep its swapped input and output gradient within
  // about 512 KiB, in whole blocks of 16 (the kernel's channel block on AVX-512; two of AVX2's).
  static std::int64_t default_piece_samples(const ConvGeometry& g);

 private:
  // The primitives for one piece size: the first piece writes the sum, the others add to it
  // (a primitive a piece never runs is not built).
  struct Piece {
    std::int64_t samples = 0;
    dnnl::convolution_forward first, accumulate;
    dnnl::memory::desc x_swapped, dy_swapped;  // one piece of the callers' buffers, axes swapped
    dnnl::memory src, kernel;                  // in the primitive's layouts
    dnnl::reorder to_src, to_kernel;
  };
  // writes: the piece can start the sum; adds: it can add to it.
  bool add_piece(const ConvGeometry& g, std::int64_t samples, bool writes, bool adds,
                 const dnnl::memory::desc& x_desc, const dnnl::memory::desc& dy_desc,
                 const dnnl::engine& engine);
  const Piece& piece_of(std::int64_t samples) const;

  std::int64_t batch_ = 0, piece_samples_ = 0;
  std::int64_t x_sample_floats_ = 0, dy_sample_floats_ = 0;  // a sample's span in each buffer
  dnnl::memory::desc dw_swapped_;  // the caller's dw, as the convolution's output sees it
  bool fast_ = false;
  std::vector<Piece> pieces_;  // the full piece, then the remainder's where the batch leaves one
  dnnl::memory dst_;           // the sum, in the primitives' layout
  dnnl::reorder from_dst_;
};

// db[f] = sum over n and the output plane of dy; `lanes` is the layout's channel block (1 for
// plain, 8 or 16 for blocked, which needs filters a multiple of it).
void conv_bias_gradient(const float* dy, std::int64_t batch, std::int64_t filters,
                        std::int64_t plane, std::int64_t lanes, float* db);

}  // namespace strata
