// strata's weight gradient for convolutions on few input channels, against a direct sum, in both
// channel blocks, with stride and padding; and the conv layer's gradients where it uses it.
#include <catch2/catch.hpp>

#include <vector>

#include "core/conv2d_layer.hpp"
#include "core/conv_weight_grad.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "gradient_check.hpp"

using namespace strata;

namespace {

// dw[f][c][kh][kw] = sum over n, oh, ow of x[n][c][oh*s+kh-p][ow*s+kw-p] * dy[n][f][oh][ow].
std::vector<double> direct_weight_grad(const Tensor& x, const Tensor& dy_plain,
                                       const ConvGeometry& g) {
  std::vector<double> dw(static_cast<std::size_t>(g.filters * g.channels * g.kernel * g.kernel));
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t f = 0; f < g.filters; ++f)
      for (std::int64_t c = 0; c < g.channels; ++c)
        for (std::int64_t kh = 0; kh < g.kernel; ++kh)
          for (std::int64_t kw = 0; kw < g.kernel; ++kw)
            for (std::int64_t oh = 0; oh < g.out_h; ++oh)
              for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
                const std::int64_t ih = oh * g.stride + kh - g.padding,
                                   iw = ow * g.stride + kw - g.padding;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                dw[static_cast<std::size_t>(((f * g.channels + c) * g.kernel + kh) * g.kernel +
                                            kw)] +=
                    static_cast<double>(x[((n * g.channels + c) * g.in_h + ih) * g.in_w + iw]) *
                    dy_plain[((n * g.filters + f) * g.out_h + oh) * g.out_w + ow];
              }
  return dw;
}

}  // namespace

TEST_CASE("the few-channel weight gradient equals a direct sum", "[layers][conv]") {
  const Layout blocked = GENERATE(Layout::channel_blocked8, Layout::channel_blocked16);
  struct Case {
    std::int64_t channels, kernel, stride, padding, in_h, in_w;
  };
  // The benchmark CNN's first conv; three channels, stride 2 and padding 2 on a non-square input,
  // so that the edge taps skip rows and columns; a 6-wide kernel, which goes tap by tap.
  // Inputs so small that some taps lie wholly in the padding (the last two).
  const Case c = GENERATE(Case{1, 5, 1, 0, 12, 12}, Case{3, 3, 2, 2, 9, 7}, Case{2, 6, 1, 1, 8, 9},
                          Case{1, 3, 2, 1, 1, 5}, Case{1, 5, 2, 2, 2, 3});
  ConvGeometry g{3, c.channels, c.in_h, c.in_w, 32, c.kernel, c.stride, c.padding, 0, 0};
  g.out_h = (c.in_h + 2 * c.padding - c.kernel) / c.stride + 1;
  g.out_w = (c.in_w + 2 * c.padding - c.kernel) / c.stride + 1;
  Rng rng(17);
  Tensor x({g.batch, g.channels, g.in_h, g.in_w}), dy({g.batch, g.filters, g.out_h, g.out_w});
  strata::testing::fill_normal(x, rng);
  strata::testing::fill_normal(dy, rng);
  Tensor dy_blocked;
  convert_layout(dy, dy_blocked, blocked);
  std::vector<float> dw(static_cast<std::size_t>(g.filters * g.channels * g.kernel * g.kernel)),
      db(static_cast<std::size_t>(g.filters));
  few_channel_weight_grad(x.data(), dy_blocked.data(), g, channel_block(blocked), dw.data(),
                          db.data());
  const std::vector<double> want = direct_weight_grad(x, dy, g);
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("weight " << i);
    REQUIRE(dw[i] == Approx(want[i]).margin(1e-4));
  }
  for (std::int64_t f = 0; f < g.filters; ++f) {
    double sum = 0.0;
    for (std::int64_t n = 0; n < g.batch; ++n)
      for (std::int64_t p = 0; p < g.out_h * g.out_w; ++p)
        sum += dy[(n * g.filters + f) * g.out_h * g.out_w + p];
    REQUIRE(db[static_cast<std::size_t>(f)] == Approx(sum).margin(1e-4));
  }
  CHECK_THROWS_AS(few_channel_weight_grad(x.data(), dy_blocked.data(), g, 4, dw.data(), db.data()),
                  std::invalid_argument);
}

TEST_CASE("a conv on one input channel with blocked output has exact gradients",
          "[layers][gradcheck][conv]") {
  // Where oneDNN's weight-gradient kernel would pad the channel (AVX2), strata's own runs.
  Conv2DLayer layer("conv", 32, 5, 1, 0, InitKind::he);
  CHECK(strata::testing::check_gradients(layer, {2, 1, 10, 10}, 23, 80) > 60);
  Conv2DLayer padded("conv", 16, 3, 2, 1, InitKind::he);
  CHECK(strata::testing::check_gradients(padded, {2, 3, 9, 8}, 24, 80) > 60);
}
