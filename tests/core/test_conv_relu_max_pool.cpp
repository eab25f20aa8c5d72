// The fused conv, ReLU and 2x2 max pooling kernel against the three computed by hand in double
// precision: geometries with padding, odd planes, several channels and both lane widths; ties,
// windows with no positive maximum, NaN; and which convs it refuses.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/conv_relu_max_pool.hpp"
#include "core/pool_layers.hpp"
#include "core/rng.hpp"

using namespace strata;

namespace {

struct Case {
  ConvGeometry conv;
  MaxPoolWindows pooling;
  std::int64_t lanes;
};

// A stride-1 conv of `kernel` with `padding` on [channels, h, w], then 2x2 pooling of stride 2.
Case make_case(std::int64_t batch, std::int64_t channels, std::int64_t h, std::int64_t w,
               std::int64_t filters, std::int64_t kernel, std::int64_t padding,
               std::int64_t lanes) {
  const std::int64_t out_h = h + 2 * padding - kernel + 1, out_w = w + 2 * padding - kernel + 1;
  return {{batch, channels, h, w, filters, kernel, 1, padding, out_h, out_w},
          {2, 2, out_h / 2, out_w / 2},
          lanes};
}

// The conv's outputs before the ReLU, plain [N, F, OH, OW], summed in double.
std::vector<double> conv_by_hand(const ConvGeometry& g, const std::vector<float>& x,
                                 const std::vector<float>& weight, const std::vector<float>& bias) {
  std::vector<double> y(static_cast<std::size_t>(g.batch * g.filters * g.out_h * g.out_w));
  std::size_t at = 0;
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t f = 0; f < g.filters; ++f)
      for (std::int64_t oh = 0; oh < g.out_h; ++oh)
        for (std::int64_t ow = 0; ow < g.out_w; ++ow, ++at) {
          double sum = bias[static_cast<std::size_t>(f)];
          for (std::int64_t c = 0; c < g.channels; ++c)
            for (std::int64_t kh = 0; kh < g.kernel; ++kh)
              for (std::int64_t kw = 0; kw < g.kernel; ++kw) {
                const std::int64_t ih = oh + kh - g.padding, iw = ow + kw - g.padding;
                if (ih < 0 || iw < 0 || ih >= g.in_h || iw >= g.in_w) continue;
                sum += static_cast<double>(x[static_cast<std::size_t>(
                           ((n * g.channels + c) * g.in_h + ih) * g.in_w + iw)]) *
                       weight[static_cast<std::size_t>(
                           ((f * g.channels + c) * g.kernel + kh) * g.kernel + kw)];
              }
          y[at] = sum;
        }
  return y;
}

std::int64_t blocked_index(const Case& c, std::int64_t n, std::int64_t f, std::int64_t ph,
                           std::int64_t pw) {
  const std::int64_t L = c.lanes;
  return (((n * (c.conv.filters / L) + f / L) * c.pooling.out_h + ph) * c.pooling.out_w + pw) * L +
         f % L;
}

struct Fused {
  std::vector<float> pooled;
  std::vector<std::uint8_t> first_maxima;
};

Fused run_fused(const Case& c, const std::vector<float>& x, const std::vector<float>& weight,
                const std::vector<float>& bias) {
  const auto size =
      static_cast<std::size_t>(c.conv.batch * c.conv.filters * c.pooling.out_h * c.pooling.out_w);
  // Filled with what the kernel never writes, so that an element it skips shows.
  Fused out{std::vector<float>(size, -7.0f), std::vector<std::uint8_t>(size, 200)};
  ConvReluMaxPool kernel(c.conv, c.pooling,
                         c.lanes == 16 ? Layout::channel_blocked16 : Layout::channel_blocked8);
  kernel.compute(c.conv.batch, x.data(), weight.data(), bias.data(), out.pooled.data(),
                 out.first_maxima.data());
  return out;
}

}  // namespace

TEST_CASE("the fused conv, ReLU and max pooling equal the three by hand", "[layers][conv]") {
  const Case c = GENERATE(make_case(3, 1, 28, 28, 32, 5, 0, 16),  // the benchmark CNN's first conv
                          make_case(2, 1, 27, 27, 16, 3, 1, 16),  // padded, odd: a row dropped
                          make_case(2, 1, 18, 18, 16, 5, 0, 16),  // 7 windows a row: 4 + 3
                          make_case(1, 1, 15, 15, 8, 5, 1, 8),    // 7 windows a row: 2 + 2 + 2 + 1
                          make_case(2, 1, 14, 14, 16, 3, 0, 8),   // 6 windows a row: 3 strips of 2
                          make_case(2, 3, 13, 15, 8, 3, 0, 8),    // 3 channels, not square
                          make_case(2, 2, 20, 22, 32, 5, 2, 16),  // 11 windows a row: 4 + 4 + 3
                          make_case(1, 4, 9, 12, 16, 4, 1, 16));  // even kernel, 5 windows a row
  INFO("channels " << c.conv.channels << ", " << c.conv.in_h << "x" << c.conv.in_w << ", filters "
                   << c.conv.filters << ", kernel " << c.conv.kernel << ", padding "
                   << c.conv.padding << ", lanes " << c.lanes);
  REQUIRE(ConvReluMaxPool::fits(c.conv, c.pooling, c.lanes));
  const ConvGeometry& g = c.conv;
  Rng rng(11);
  std::vector<float> x(static_cast<std::size_t>(g.batch * g.channels * g.in_h * g.in_w)),
      weight(static_cast<std::size_t>(g.filters * g.channels * g.kernel * g.kernel)),
      bias(static_cast<std::size_t>(g.filters));
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : weight) v = 0.3f * static_cast<float>(rng.normal());
  for (float& v : bias) v = 0.2f * static_cast<float>(rng.normal());
  const std::vector<double> y = conv_by_hand(g, x, weight, bias);
  const Fused fused = run_fused(c, x, weight, bias);

  int positive = 0, none = 0, checked_choices = 0;
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t f = 0; f < g.filters; ++f)
      for (std::int64_t ph = 0; ph < c.pooling.out_h; ++ph)
        for (std::int64_t pw = 0; pw < c.pooling.out_w; ++pw) {
          double window[4];
          for (int k = 0; k < 4; ++k)
            window[k] = y[static_cast<std::size_t>(
                ((n * g.filters + f) * g.out_h + 2 * ph + k / 2) * g.out_w + 2 * pw + k % 2)];
          int first = 0;
          for (int k = 1; k < 4; ++k)
            if (window[k] > window[first]) first = k;
          double gap = std::numeric_limits<double>::infinity();
          for (int k = 0; k < 4; ++k)
            if (k != first) gap = std::min(gap, window[first] - window[k]);
          const auto at = static_cast<std::size_t>(blocked_index(c, n, f, ph, pw));
          const double top = window[first];
          REQUIRE(fused.pooled[at] == Approx(std::max(top, 0.0)).margin(1e-5));
          const std::uint8_t chosen = fused.first_maxima[at];
          if (top > 1e-4) {
            ++positive;
            // Where two inputs are within rounding of each other, either may be the first maximum.
            if (gap > 1e-4) {
              REQUIRE(static_cast<int>(chosen) == first);
              ++checked_choices;
            } else {
              REQUIRE(chosen < 4);
            }
          } else if (top < -1e-4) {
            ++none;
            REQUIRE(chosen == Pool2DLayer::no_first_max);
          }
        }
  // Both kinds of window occur, and nearly every positive one's choice is checked.
  CHECK(none > 0);
  CHECK(positive > 0);
  CHECK(checked_choices > positive * 9 / 10);
}

TEST_CASE("the fused conv's pooling keeps the first of tied maxima, none where not positive, NaN",
          "[layers][conv]") {
  const std::int64_t lanes = GENERATE(8, 16);
  const Case c = make_case(1, 1, 6, 8, 16, 3, 0, lanes);
  const ConvGeometry& g = c.conv;
  // A zero input: every conv output is its filter's bias, so all four inputs of every window tie.
  std::vector<float> x(static_cast<std::size_t>(g.in_h * g.in_w), 0.0f),
      weight(static_cast<std::size_t>(g.filters * g.kernel * g.kernel), 0.5f),
      bias(static_cast<std::size_t>(g.filters));
  for (std::int64_t f = 0; f < g.filters; ++f)
    bias[static_cast<std::size_t>(f)] = f % 2 == 0 ? 0.25f * static_cast<float>(f + 1) : -1.0f;
  Fused fused = run_fused(c, x, weight, bias);
  for (std::int64_t f = 0; f < g.filters; ++f)
    for (std::int64_t ph = 0; ph < c.pooling.out_h; ++ph)
      for (std::int64_t pw = 0; pw < c.pooling.out_w; ++pw) {
        const auto at = static_cast<std::size_t>(blocked_index(c, 0, f, ph, pw));
        if (f % 2 == 0) {
          CHECK(fused.pooled[at] == 0.25f * static_cast<float>(f + 1));
          CHECK(fused.first_maxima[at] == 0);
        } else {
          CHECK(fused.pooled[at] == 0.0f);
          CHECK(fused.first_maxima[at] == Pool2DLayer::no_first_max);
        }
      }
  // A NaN in the input reaches every window whose conv outputs read it, and passes no gradient.
  x[0] = std::numeric_limits<float>::quiet_NaN();
  fused = run_fused(c, x, weight, bias);
  const auto corner = static_cast<std::size_t>(blocked_index(c, 0, 0, 0, 0));
  CHECK(std::isnan(fused.pooled[corner]));
  CHECK(fused.first_maxima[corner] == Pool2DLayer::no_first_max);
  const auto far = static_cast<std::size_t>(blocked_index(c, 0, 0, 1, 2));
  CHECK(fused.pooled[far] == 0.25f);
}

TEST_CASE("the fused conv, ReLU and max pooling refuse what they do not run", "[layers][conv]") {
  const Case fits = make_case(1, 1, 28, 28, 32, 5, 0, 16);
  CHECK(ConvReluMaxPool::fits(fits.conv, fits.pooling, 16));
  CHECK(ConvReluMaxPool::fits(fits.conv, fits.pooling, 8));
  CHECK_FALSE(ConvReluMaxPool::fits(fits.conv, fits.pooling, 4));  // no such channel block
  Case strided = fits;
  strided.conv.stride = 2;
  CHECK_FALSE(ConvReluMaxPool::fits(strided.conv, strided.pooling, 16));
  const Case wide_input = make_case(1, ConvReluMaxPool::max_channels + 1, 28, 28, 32, 5, 0, 16);
  CHECK_FALSE(ConvReluMaxPool::fits(wide_input.conv, wide_input.pooling, 16));
  const Case odd_filters = make_case(1, 1, 28, 28, 24, 5, 0, 16);
  CHECK_FALSE(ConvReluMaxPool::fits(odd_filters.conv, odd_filters.pooling, 16));
  CHECK(ConvReluMaxPool::fits(odd_filters.conv, odd_filters.pooling, 8));
  Case big_windows = fits;
  big_windows.pooling = {3, 3, 8, 8};
  CHECK_FALSE(ConvReluMaxPool::fits(big_windows.conv, big_windows.pooling, 16));
  Case overlapping = fits;
  overlapping.pooling = {2, 1, 23, 23};
  CHECK_FALSE(ConvReluMaxPool::fits(overlapping.conv, overlapping.pooling, 16));
  CHECK_THROWS_AS(ConvReluMaxPool(strided.conv, strided.pooling, Layout::channel_blocked16),
                  std::invalid_argument);
}
