// A conv's input gradient by GEMM and scatter-add against a direct sum: every channel layout of
// the input and of the output gradient, stride, padding that leaves taps outside the input, tiles
// of one sample, of two (the last one short) and of all; and through the layer, with and without
// a fused ReLU, whichever kernel it picked.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "conv_taps.hpp"
#include "core/conv2d_layer.hpp"
#include "core/conv_input_grad.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "gradient_check.hpp"

using namespace strata;

namespace {

// dx[n][c][ih][iw] = sum over f, kh, kw of w[f][c][kh][kw] * dy[n][f][oh][ow], ih = oh*s+kh-p.
std::vector<double> direct_input_grad(const Tensor& w, const Tensor& dy_plain,
                                      const ConvGeometry& g) {
  std::vector<double> dx(static_cast<std::size_t>(g.batch * g.channels * g.in_h * g.in_w));
  strata::testing::for_each_tap(
      g, [&](auto n, auto f, auto c, auto kh, auto kw, auto oh, auto ow, auto ih, auto iw) {
        dx[static_cast<std::size_t>(((n * g.channels + c) * g.in_h + ih) * g.in_w + iw)] +=
            static_cast<double>(w[((f * g.channels + c) * g.kernel + kh) * g.kernel + kw]) *
            dy_plain[((n * g.filters + f) * g.out_h + oh) * g.out_w + ow];
      });
  return dx;
}

struct Case {
  std::int64_t channels, kernel, stride, padding, in_h, in_w;
  Layout layout;
};

ConvGeometry geometry_of(const Case& c, std::int64_t batch, std::int64_t filters) {
  return strata::testing::conv_geometry(batch, c.channels, c.in_h, c.in_w, filters, c.kernel,
                                        c.stride, c.padding);
}

}  // namespace

TEST_CASE("a conv's input gradient by GEMM equals a direct sum", "[layers][conv]") {
  // The benchmark CNN's second conv; stride 2 and padding 2 on a non-square input (edge taps
  // outside the input, last rows unread); a 6-wide kernel; an input so small that whole windows
  // lie partly in the padding; the plain layout; both channel blocks, the output gradient in a
  // layout other than the input's.
  const Case c = GENERATE(Case{32, 5, 1, 0, 12, 12, Layout::channel_blocked8},
                          Case{16, 3, 2, 2, 9, 7, Layout::channel_blocked8},
                          Case{8, 6, 1, 1, 8, 9, Layout::channel_blocked8},
                          Case{16, 5, 2, 2, 2, 3, Layout::channel_blocked16},
                          Case{3, 3, 2, 1, 8, 9, Layout::plain},
                          Case{16, 3, 1, 1, 6, 5, Layout::channel_blocked16});
  const Layout dy_layout =
      GENERATE(Layout::plain, Layout::channel_blocked8, Layout::channel_blocked16);
  // Tiles of one sample, of two (the third sample's tile is short), and of every sample.
  const int tile_samples = GENERATE(1, 2, 3);
  const ConvGeometry g = geometry_of(c, 3, 32);
  const std::int64_t tile_bytes =
      tile_samples == 3 ? ConvInputGradient::default_tile_bytes
                        : tile_samples * 4 * g.out_h * g.out_w * g.kernel * g.kernel * g.channels;
  INFO("channels " << g.channels << " kernel " << g.kernel << " stride " << g.stride << " padding "
                   << g.padding << " input " << g.in_h << "x" << g.in_w << " tile "
                   << tile_samples);
  Rng rng(29);
  Tensor w({g.filters, g.channels, g.kernel, g.kernel}), dy({g.batch, g.filters, g.out_h, g.out_w});
  strata::testing::fill_normal(w, rng);
  strata::testing::fill_normal(dy, rng);
  Tensor dy_in, dx({g.batch, g.channels, g.in_h, g.in_w}), dx_plain;
  convert_layout(dy, dy_in, dy_layout);
  dx.resize(dx.shape(), c.layout);
  for (float& v : dx.values()) v = 1e6f;  // overwritten, not added to
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  ConvInputGradient input_grad(g, dy_layout, c.layout, engine, tile_bytes);
  input_grad.compute(dy_in.data(), w.data(), dx.data(), stream);
  convert_layout(dx, dx_plain, Layout::plain);
  const std::vector<double> want = direct_input_grad(w, dy, g);
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("input " << i);
    REQUIRE(dx_plain[static_cast<std::int64_t>(i)] == Approx(want[i]).margin(1e-4));
  }
}

TEST_CASE("a conv layer's input gradient equals a direct sum on its chosen kernel",
          "[layers][conv]") {
  const Case c = GENERATE(Case{32, 5, 1, 0, 12, 12, Layout::channel_blocked8},
                          Case{16, 3, 2, 1, 9, 8, Layout::channel_blocked8},
                          Case{16, 3, 1, 1, 7, 7, Layout::plain});
  const bool fused_relu = GENERATE(false, true);
  const ConvGeometry g = geometry_of(c, 4, 64);
  Conv2DLayer layer("conv", static_cast<int>(g.filters), static_cast<int>(g.kernel),
                    static_cast<int>(g.stride), static_cast<int>(g.padding), InitKind::he);
  if (fused_relu) layer.fuse_relu();
  layer.build({g.channels, g.in_h, g.in_w});
  Rng rng(31);
  layer.initialize(rng);
  Tensor x({g.batch, g.channels, g.in_h, g.in_w}), x_in, y, y_plain, dx, dx_plain;
  strata::testing::fill_normal(x, rng);
  convert_layout(x, x_in, c.layout);
  layer.forward(x_in, y, true);
  const std::string kernel = layer.implementation();
  INFO("implementation: " << kernel << (fused_relu ? ", ReLU fused" : ""));
  const bool by_gemm = kernel.find("input gradient by GEMM") != std::string::npos;
  // The GEMM replaces oneDNN's backward-data kernel exactly where that is jit:avx2 and the input
  // is blocked (on an AVX-512 CPU an 8-blocked input may run forward on jit:avx2 and backward on
  // another kernel, so the forward's name does not decide).
  const bool on_avx2 = kernel.find("input gradient on jit:avx2") != std::string::npos;
  CHECK(!(on_avx2 && c.layout != Layout::plain));
  CHECK(!(by_gemm && c.layout == Layout::plain));
  Tensor dy({g.batch, g.filters, g.out_h, g.out_w}), dy_out;
  strata::testing::fill_normal(dy, rng);
  convert_layout(dy, dy_out, y.layout());
  layer.backward(x_in, y, dy_out, &dx);
  REQUIRE(dx.layout() == c.layout);
  // The fused ReLU passes the gradient only where the output is positive.
  convert_layout(y, y_plain, Layout::plain);
  Tensor dy_passed = dy;
  if (fused_relu)
    for (std::int64_t i = 0; i < dy.size(); ++i)
      if (y_plain[i] <= 0.0f) dy_passed[i] = 0.0f;
  convert_layout(dx, dx_plain, Layout::plain);
  const Tensor& w = *layer.params()[0].value;
  const std::vector<double> want = direct_input_grad(w, dy_passed, g);
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("input " << i);
    REQUIRE(dx_plain[static_cast<std::int64_t>(i)] == Approx(want[i]).margin(1e-4));
  }
  if (by_gemm) {
    // Bit for bit what ConvInputGradient computes, so the layer's backward took that path.
    Tensor dy_passed_out, alone(dx.shape());
    convert_layout(dy_passed, dy_passed_out, y.layout());
    alone.resize(dx.shape(), dx.layout());
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    ConvInputGradient(g, y.layout(), c.layout, engine)
        .compute(dy_passed_out.data(), w.data(), alone.data(), stream);
    for (std::int64_t i = 0; i < dx.size(); ++i) REQUIRE(dx[i] == alone[i]);
  }
}
