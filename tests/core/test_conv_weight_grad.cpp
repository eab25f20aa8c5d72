// A conv layer's weight and bias gradients (a forward convolution where oneDNN has a fast kernel
// for it) against a direct sum, with few and many channels, stride, padding and both channel
// blocks; and finite-difference checks of convs on few channels.
#include <catch2/catch.hpp>

#include <dnnl.hpp>

#include <algorithm>
#include <vector>

#include "conv_taps.hpp"
#include "core/conv2d_layer.hpp"
#include "core/conv_weight_grad.hpp"
#include "core/dnnl_layout.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "gradient_check.hpp"

using namespace strata;

namespace {

// dw[f][c][kh][kw] = sum over n, oh, ow of x[n][c][oh*s+kh-p][ow*s+kw-p] * dy[n][f][oh][ow].
std::vector<double> direct_weight_grad(const Tensor& x, const Tensor& dy_plain,
                                       const ConvGeometry& g) {
  std::vector<double> dw(static_cast<std::size_t>(g.filters * g.channels * g.kernel * g.kernel));
  strata::testing::for_each_tap(
      g, [&](auto n, auto f, auto c, auto kh, auto kw, auto oh, auto ow, auto ih, auto iw) {
        dw[static_cast<std::size_t>(((f * g.channels + c) * g.kernel + kh) * g.kernel + kw)] +=
            static_cast<double>(x[((n * g.channels + c) * g.in_h + ih) * g.in_w + iw]) *
            dy_plain[((n * g.filters + f) * g.out_h + oh) * g.out_w + ow];
      });
  return dw;
}

// Whether oneDNN's backward-weights kernel reads this conv's plain input as it is, which makes
// the layer use that kernel instead of the forward convolution.
bool backward_weights_reads_plain_input(const ConvGeometry& g) {
  using dnnl::memory;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const memory::dims strides{g.stride, g.stride}, pads{g.padding, g.padding};
  const memory::desc src_plain({g.batch, g.channels, g.in_h, g.in_w}, memory::data_type::f32,
                               memory::format_tag::nchw),
      src_any({g.batch, g.channels, g.in_h, g.in_w}, memory::data_type::f32,
              memory::format_tag::any),
      weights_any({g.filters, g.channels, g.kernel, g.kernel}, memory::data_type::f32,
                  memory::format_tag::any),
      bias({g.filters}, memory::data_type::f32, memory::format_tag::x),
      dst_any({g.batch, g.filters, g.out_h, g.out_w}, memory::data_type::f32,
              memory::format_tag::any);
  const dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_plain,
       weights_any, bias, dst_any, strides, pads, pads},
      engine);
  const dnnl::convolution_backward_weights::primitive_desc backward(
      {dnnl::algorithm::convolution_direct, src_any, weights_any, bias, dst_any, strides, pads,
       pads},
      engine, forward);
  return backward.src_desc() == src_plain;
}

}  // namespace

TEST_CASE("a conv's weight and bias gradients equal a direct sum", "[layers][conv]") {
  struct Case {
    std::int64_t channels, kernel, stride, padding, in_h, in_w;
    Layout input_layout;
    std::int64_t batch = 3;
  };
  // The benchmark CNN's two convs (the forward-convolution path must serve both); three channels,
  // stride 2 and padding 2 on a non-square input, so that the edge taps skip rows and columns and
  // the last rows go unread; a 6-wide kernel; inputs so small that some taps lie wholly in the
  // padding (the last two few-channel cases); a blocked input with padding; stride 2 leaving the
  // last input row unread (the forward convolution's right padding is then negative); right
  // paddings that differ between height and width (0 and 1).
  const Case c = GENERATE(
      Case{1, 5, 1, 0, 12, 12, Layout::plain}, Case{16, 5, 1, 0, 12, 12, Layout::channel_blocked8},
      Case{3, 3, 2, 2, 9, 7, Layout::plain}, Case{2, 6, 1, 1, 8, 9, Layout::plain},
      Case{1, 3, 2, 1, 1, 5, Layout::plain}, Case{1, 5, 2, 2, 2, 3, Layout::plain},
      Case{16, 3, 1, 1, 6, 5, Layout::channel_blocked16}, Case{3, 3, 2, 0, 8, 8, Layout::plain},
      Case{3, 3, 2, 1, 8, 9, Layout::plain},
      // 20 samples: the weight gradient's default pieces of 16 and a remainder of 4.
      Case{16, 5, 1, 0, 12, 12, Layout::channel_blocked16, 20});
  const ConvGeometry g = strata::testing::conv_geometry(c.batch, c.channels, c.in_h, c.in_w, 32,
                                                        c.kernel, c.stride, c.padding);
  INFO("batch " << g.batch << " channels " << g.channels << " kernel " << g.kernel << " stride "
                << g.stride << " padding " << g.padding << " input " << g.in_h << "x" << g.in_w);
  Conv2DLayer layer("conv", static_cast<int>(g.filters), static_cast<int>(g.kernel),
                    static_cast<int>(g.stride), static_cast<int>(g.padding), InitKind::he);
  layer.build({g.channels, g.in_h, g.in_w});
  Rng rng(17);
  layer.initialize(rng);
  Tensor x({g.batch, g.channels, g.in_h, g.in_w}), x_in, y, dx;
  strata::testing::fill_normal(x, rng);
  convert_layout(x, x_in, c.input_layout);
  layer.forward(x_in, y, true);
  // oneDNN takes no right padding below 0 (the forward pass left input rows unread, more than
  // the padding): there the layer falls back to oneDNN's backward-weights kernel; and it takes
  // that kernel for a plain input the kernel reads as it is (AVX-512's on few channels).
  const bool forward_possible = (c.in_h + 2 * c.padding - c.kernel) % c.stride <= c.padding &&
                                (c.in_w + 2 * c.padding - c.kernel) % c.stride <= c.padding;
  const bool kernel_reads_input =
      c.input_layout == Layout::plain && backward_weights_reads_plain_input(g);
  INFO("implementation: " << layer.implementation());
  if (forward_possible && !kernel_reads_input)
    CHECK_THAT(layer.implementation(), Catch::Contains("weight gradient as a forward convolution"));
  else
    CHECK_THAT(layer.implementation(), Catch::Contains("weight gradient on "));
  Tensor dy({g.batch, g.filters, g.out_h, g.out_w}), dy_out;
  strata::testing::fill_normal(dy, rng);
  convert_layout(dy, dy_out, y.layout());
  layer.backward(x_in, y, dy_out, &dx);
  const auto params = layer.params();
  const Tensor& dw = *params[0].grad;
  const Tensor& db = *params[1].grad;
  const std::vector<double> want = direct_weight_grad(x, dy, g);
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("weight " << i);
    REQUIRE(dw[static_cast<std::int64_t>(i)] == Approx(want[i]).margin(1e-4));
  }
  for (std::int64_t f = 0; f < g.filters; ++f) {
    double sum = 0.0;
    for (std::int64_t n = 0; n < g.batch; ++n)
      for (std::int64_t p = 0; p < g.out_h * g.out_w; ++p)
        sum += dy[(n * g.filters + f) * g.out_h * g.out_w + p];
    REQUIRE(db[f] == Approx(sum).margin(1e-4));
  }
}

TEST_CASE("a conv on one input channel with blocked output has exact gradients",
          "[layers][gradcheck][conv]") {
  // Where oneDNN's backward-weights kernel would pad the channels to a block of 8 or 16.
  Conv2DLayer layer("conv", 32, 5, 1, 0, InitKind::he);
  CHECK(strata::testing::check_gradients(layer, {2, 1, 10, 10}, 23, 80) > 60);
  Conv2DLayer padded("conv", 16, 3, 2, 1, InitKind::he);
  CHECK(strata::testing::check_gradients(padded, {2, 3, 9, 8}, 24, 80) > 60);
}

TEST_CASE("a conv's weight gradient over pieces of the batch equals a direct sum",
          "[layers][conv]") {
  struct Case {
    std::int64_t channels, kernel, stride, padding, in_h, in_w, piece;
    Layout layout;
  };
  // 11 samples in pieces of 4 (the last of 3) and of 5 (the last of 1), blocked and plain, one with
  // stride and padding; pieces of 11 and more are the whole batch.
  const Case c = GENERATE(Case{16, 5, 1, 0, 12, 12, 4, Layout::channel_blocked16},
                          Case{16, 5, 1, 0, 12, 12, 5, Layout::channel_blocked8},
                          Case{3, 3, 2, 1, 8, 9, 4, Layout::plain},
                          Case{16, 3, 1, 1, 6, 5, 11, Layout::channel_blocked16},
                          Case{16, 3, 1, 1, 6, 5, 64, Layout::channel_blocked8});
  const ConvGeometry g = strata::testing::conv_geometry(11, c.channels, c.in_h, c.in_w, 32,
                                                        c.kernel, c.stride, c.padding);
  INFO("channels " << g.channels << " pieces of " << c.piece);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  ConvWeightGradient pieces(g, activation_desc(g.batch, g.channels, g.in_h, g.in_w, c.layout),
                            activation_desc(g.batch, g.filters, g.out_h, g.out_w, c.layout), engine,
                            c.piece);
  REQUIRE(pieces.fast());
  CHECK(pieces.piece_samples() == std::min<std::int64_t>(c.piece, g.batch));
  Rng rng(29);
  Tensor x({g.batch, g.channels, g.in_h, g.in_w}), dy({g.batch, g.filters, g.out_h, g.out_w}), x_in,
      dy_in;
  strata::testing::fill_normal(x, rng);
  strata::testing::fill_normal(dy, rng);
  convert_layout(x, x_in, c.layout);
  convert_layout(dy, dy_in, c.layout);
  // Filled first, so that a missing copy of the sum into dw would show.
  std::vector<float> dw(static_cast<std::size_t>(g.filters * g.channels * g.kernel * g.kernel),
                        7.0f);
  pieces.compute(x_in.data(), dy_in.data(), dw.data(), stream);
  const std::vector<double> want = direct_weight_grad(x, dy, g);
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("weight " << i);
    REQUIRE(dw[i] == Approx(want[i]).margin(1e-4));
  }
  // A second call gives the same sums: its first piece starts the sum afresh instead of adding to
  // what the last call left.
  const std::vector<float> first = dw;
  pieces.compute(x_in.data(), dy_in.data(), dw.data(), stream);
  CHECK(dw == first);
}

TEST_CASE("a conv's weight-gradient pieces fit a core's cache", "[layers][conv]") {
  // The benchmark CNN's second conv: 34.8 KB of swapped input and output gradient a sample.
  CHECK(ConvWeightGradient::default_piece_samples({128, 32, 12, 12, 64, 5, 1, 0, 8, 8}) == 16);
  // A sample larger than the budget still takes one block of 16.
  CHECK(ConvWeightGradient::default_piece_samples({128, 64, 64, 64, 64, 3, 1, 1, 64, 64}) == 16);
  // A small one takes several blocks.
  CHECK(ConvWeightGradient::default_piece_samples({128, 8, 8, 8, 16, 3, 1, 1, 8, 8}) == 80);
}
