// A conv's weight and bias gradients taken from the max pooling after it: the kernel against a
// direct sum over layouts, pool windows (tiling, overlapping, with gaps), ReLU and tied maxima;
// and a model whose first trainable layer is a conv before a max pooling, against the two layers'
// own backward passes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "conv_taps.hpp"
#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/loss.hpp"
#include "core/model.hpp"
#include "core/pool_layers.hpp"
#include "core/pooled_conv_weight_grad.hpp"
#include "core/rng.hpp"
#include "gradient_check.hpp"
#include "layer_specs.hpp"

using namespace strata;

namespace {

struct PlainPooling {
  Tensor pooled, y_grad;  // plain [N,F,PH,PW] and [N,F,OH,OW]
  int tied_windows = 0;   // windows that pass a gradient and hold their maximum more than once
};

// The pooling's output, and the conv output's gradient by the rule: each window's gradient goes
// to its first maximum in row-major order, and nowhere where `relu` and the maximum is not
// positive.
PlainPooling pool_by_hand(const Tensor& y, const Tensor& pooled_grad, const MaxPoolWindows& w,
                          bool relu) {
  const std::int64_t batch = y.dim(0), filters = y.dim(1), out_h = y.dim(2), out_w = y.dim(3);
  PlainPooling p{Tensor({batch, filters, w.out_h, w.out_w}), Tensor(y.shape())};
  for (std::int64_t nf = 0; nf < batch * filters; ++nf)
    for (std::int64_t ph = 0; ph < w.out_h; ++ph)
      for (std::int64_t pw = 0; pw < w.out_w; ++pw) {
        const auto at = [&](std::int64_t kh, std::int64_t kw) {
          return (nf * out_h + ph * w.stride + kh) * out_w + pw * w.stride + kw;
        };
        std::int64_t first = at(0, 0);
        for (std::int64_t kh = 0; kh < w.size; ++kh)
          for (std::int64_t kw = 0; kw < w.size; ++kw)
            if (y[at(kh, kw)] > y[first]) first = at(kh, kw);
        const std::int64_t window = (nf * w.out_h + ph) * w.out_w + pw;
        p.pooled[window] = y[first];
        if (relu && y[first] <= 0.0f) continue;
        p.y_grad[first] += pooled_grad[window];
        int maxima = 0;
        for (std::int64_t kh = 0; kh < w.size; ++kh)
          for (std::int64_t kw = 0; kw < w.size; ++kw) maxima += y[at(kh, kw)] == y[first] ? 1 : 0;
        if (maxima > 1) ++p.tied_windows;
      }
  return p;
}

}  // namespace

TEST_CASE("a conv's weight gradient from the max pooling equals a direct sum", "[layers][conv]") {
  struct Case {
    std::int64_t channels, in_h, in_w, kernel, stride, padding, pool_size, pool_stride;
    Layout x_layout, y_layout;
    bool relu;
  };
  // The benchmark CNN's first conv in both channel blocks; overlapping windows on a strided,
  // padded conv of three channels with plain output; a 9-wide kernel (two 8-float chunks a row)
  // with windows that leave gaps; blocked input with windows that leave the last rows out; a
  // blocked input of 8 channels and a plain output without ReLU; plain output with ReLU.
  const Case c = GENERATE(
      Case{1, 28, 28, 5, 1, 0, 2, 2, Layout::plain, Layout::channel_blocked16, true},
      Case{1, 12, 12, 5, 1, 0, 2, 2, Layout::plain, Layout::channel_blocked8, true},
      Case{3, 9, 11, 3, 2, 2, 3, 2, Layout::plain, Layout::plain, false},
      Case{2, 13, 13, 9, 1, 1, 2, 3, Layout::plain, Layout::channel_blocked8, true},
      Case{16, 10, 10, 3, 1, 1, 3, 3, Layout::channel_blocked16, Layout::channel_blocked16, true},
      Case{8, 7, 9, 5, 1, 2, 2, 2, Layout::channel_blocked8, Layout::plain, false},
      Case{2, 10, 10, 3, 1, 0, 2, 2, Layout::plain, Layout::plain, true});
  const ConvGeometry g = strata::testing::conv_geometry(3, c.channels, c.in_h, c.in_w, 16, c.kernel,
                                                        c.stride, c.padding);
  const MaxPoolWindows windows{c.pool_size, c.pool_stride,
                               (g.out_h - c.pool_size) / c.pool_stride + 1,
                               (g.out_w - c.pool_size) / c.pool_stride + 1};
  INFO("channels " << g.channels << " kernel " << g.kernel << " stride " << g.stride << " padding "
                   << g.padding << " pool " << c.pool_size << "/" << c.pool_stride);
  Rng rng(5);
  Tensor x({g.batch, g.channels, g.in_h, g.in_w}), y({g.batch, g.filters, g.out_h, g.out_w}),
      pooled_grad({g.batch, g.filters, windows.out_h, windows.out_w});
  strata::testing::fill_normal(x, rng);
  strata::testing::fill_normal(y, rng);
  strata::testing::fill_normal(pooled_grad, rng);
  if (c.relu)
    for (auto& v : y.values()) v = std::max(v, 0.0f);  // whole windows of zeros pass nothing
  // Ties: in every third window the last element is set to the window's maximum, so that the
  // maximum is there twice and only the first may take the gradient.
  for (std::int64_t nf = 0; nf < g.batch * g.filters; ++nf)
    for (std::int64_t ph = 0; ph < windows.out_h; ++ph)
      for (std::int64_t pw = (ph % 3); pw < windows.out_w; pw += 3) {
        float* corner =
            y.data() + (nf * g.out_h + ph * windows.stride) * g.out_w + pw * windows.stride;
        float max = corner[0];
        for (std::int64_t kh = 0; kh < windows.size; ++kh)
          for (std::int64_t kw = 0; kw < windows.size; ++kw)
            max = std::max(max, corner[kh * g.out_w + kw]);
        corner[(windows.size - 1) * g.out_w + windows.size - 1] = max;
      }
  const PlainPooling want = pool_by_hand(y, pooled_grad, windows, c.relu);
  CHECK(want.tied_windows > 0);  // the rule's first-maximum part is exercised

  Tensor x_in, y_in, pooled_grad_in;
  convert_layout(x, x_in, c.x_layout);
  convert_layout(y, y_in, c.y_layout);
  convert_layout(pooled_grad, pooled_grad_in, c.y_layout);
  // The first maxima as the pooling layer records them in a training forward pass (and not in
  // one that does not train).
  Pool2DLayer pool("pool", Pool2DLayer::Mode::max, static_cast<int>(c.pool_size),
                   static_cast<int>(c.pool_stride));
  pool.build({g.filters, g.out_h, g.out_w});
  REQUIRE(pool.max_windows().has_value());
  if (c.relu) pool.apply_relu_derivative();
  pool.record_first_maxima(true);
  Tensor pooled_in;
  pool.forward(y_in, pooled_in, false);
  CHECK(pool.first_maxima().empty());
  pool.forward(y_in, pooled_in, true);
  REQUIRE(static_cast<std::int64_t>(pool.first_maxima().size()) == pooled_in.size());
  const Tensor pooled_plain = to_plain(pooled_in);
  for (std::int64_t i = 0; i < want.pooled.size(); ++i) REQUIRE(pooled_plain[i] == want.pooled[i]);
  PooledConvWeightGradient from_pool(g, windows);
  Tensor dw({g.filters, g.channels, g.kernel, g.kernel}), db({g.filters});
  dw.fill(7.0f);  // written, not added to
  from_pool.compute(g.batch, x_in.data(), c.x_layout, pool.first_maxima().data(),
                    pooled_grad_in.data(), c.y_layout, dw.data(), db.data());

  std::vector<double> dw_want(static_cast<std::size_t>(dw.size())), db_want(16);
  strata::testing::for_each_tap(g, [&](auto n, auto f, auto ch, auto kh, auto kw, auto oh, auto ow,
                                       auto ih, auto iw) {
    dw_want[static_cast<std::size_t>(((f * g.channels + ch) * g.kernel + kh) * g.kernel + kw)] +=
        static_cast<double>(x[((n * g.channels + ch) * g.in_h + ih) * g.in_w + iw]) *
        want.y_grad[((n * g.filters + f) * g.out_h + oh) * g.out_w + ow];
  });
  for (std::int64_t i = 0; i < want.y_grad.size(); ++i)
    db_want[static_cast<std::size_t>(i / (g.out_h * g.out_w) % g.filters)] += want.y_grad[i];
  for (std::size_t i = 0; i < dw_want.size(); ++i) {
    INFO("weight " << i);
    REQUIRE(dw[static_cast<std::int64_t>(i)] == Approx(dw_want[i]).margin(1e-4));
  }
  for (std::int64_t f = 0; f < g.filters; ++f)
    REQUIRE(db[f] == Approx(db_want[static_cast<std::size_t>(f)]).margin(1e-4));
}

TEST_CASE("a max pooling records each window's first maximum, or none", "[layers][pool]") {
  // One sample, one channel, 4x4 in 2x2 windows: a tie (the first of two maxima, row-major, is
  // index 1), a NaN window's maximum, which no input equals (none), a window whose maximum is not
  // positive (none under a ReLU, index 3 without), and a plain one (index 2).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y({1, 1, 4, 4}, {0.1f, 0.9f, nan, 1.0f,   //
                          0.9f, 0.2f, 2.0f, 3.0f,  //
                          -3.f, -2.f, 0.5f, 0.1f,  //
                          -5.f, -1.f, 0.7f, 0.2f});
  for (const bool relu : {false, true}) {
    INFO("ReLU before the pooling: " << relu);
    Pool2DLayer pool("pool", Pool2DLayer::Mode::max, 2, 2);
    pool.build({1, 4, 4});
    if (relu) pool.apply_relu_derivative();
    Tensor pooled;
    pool.forward(y, pooled, true);
    CHECK(pool.first_maxima().empty());  // not asked to record
    pool.record_first_maxima(true);
    pool.forward(y, pooled, true);
    const std::uint8_t none = Pool2DLayer::no_first_max;
    const std::vector<std::uint8_t> want = {1, none, relu ? none : std::uint8_t{3}, 2};
    CHECK(pool.first_maxima() == want);
  }
}

TEST_CASE("a model's first trainable conv takes its weight gradient from the max pooling",
          "[layers][conv][model]") {
  using strata::testing::layer;
  const auto conv = [](const std::string& name) {
    LayerSpec s = layer(LayerKind::conv2d, name);
    s.filters = 16;
    s.kernel = 3;
    return s;
  };
  const auto maxpool = [](const std::string& name) {
    LayerSpec s = layer(LayerKind::maxpool2d, name);
    s.size = 2;
    s.stride = 2;
    return s;
  };
  // conv -> relu -> pool -> conv -> relu -> pool -> flatten -> dense on [1,14,14]; layers 0 and 2
  // are the convs (each ReLU runs inside its conv).
  const std::vector<LayerSpec> specs = {conv("conv_a"),
                                        layer(LayerKind::relu, "relu_a"),
                                        maxpool("pool_a"),
                                        conv("conv_b"),
                                        layer(LayerKind::relu, "relu_b"),
                                        maxpool("pool_b"),
                                        layer(LayerKind::flatten, "flat"),
                                        layer(LayerKind::dense, "fc", 4)};
  const bool freeze_first = GENERATE(false, true);
  INFO("first conv frozen: " << freeze_first);
  Model model(specs, {1, 14, 14}, 4, 9);
  if (freeze_first) model.freeze({"conv_a"});
  const std::size_t fused = freeze_first ? 2 : 0;  // the first trainable conv
  Rng rng(4);
  Tensor x({5, 1, 14, 14}), grad_logits;
  strata::testing::fill_normal(x, rng);
  const std::vector<std::int32_t> labels{0, 3, 1, 2, 3};
  const Tensor logits = model.forward(x, true);
  softmax_cross_entropy(logits, labels, grad_logits);
  model.backward(x, grad_logits);
  auto& first = dynamic_cast<Conv2DLayer&>(model.layer(fused));
  CHECK_THAT(first.implementation(), Catch::Contains("weight gradient from the max pooling"));
  // On a plain input the conv, its ReLU and the pooling run as one kernel, trained or frozen (no
  // backward pass reaches a frozen first conv); on the first pooling's blocked output they do not.
  const std::string fused_forward = "fused conv, ReLU and max pooling forward";
  CHECK_THAT(dynamic_cast<Conv2DLayer&>(model.layer(0)).implementation(),
             Catch::Contains(fused_forward));
  if (freeze_first) CHECK_THAT(first.implementation(), !Catch::Contains(fused_forward));
  if (!freeze_first)  // the second conv's input gradient is needed: it takes the usual path
    CHECK_THAT(dynamic_cast<Conv2DLayer&>(model.layer(2)).implementation(),
               !Catch::Contains("from the max pooling"));
  const std::vector<Param> params = model.params_of(fused);
  const Tensor dw = *params[0].grad, db = *params[1].grad;

  // The same gradients by the layers' own backward passes: the pooling's, then the conv's.
  std::vector<Tensor> out(model.layer_count()), grad(model.layer_count());
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    model.layer(i).forward(i == 0 ? x : out[i - 1], out[i], true);
  REQUIRE(out.back().size() == logits.size());
  for (std::int64_t i = 0; i < logits.size(); ++i)
    REQUIRE(logits[i] == Approx(out.back()[i]).margin(1e-5));
  for (std::size_t i = model.layer_count(); i-- > fused;) {
    const Tensor& grad_out = i + 1 == model.layer_count() ? grad_logits : grad[i];
    model.layer(i).backward(i == 0 ? x : out[i - 1], out[i], grad_out,
                            i == fused ? nullptr : &grad[i - 1]);
  }
  REQUIRE(dw.size() == params[0].grad->size());
  int nonzero = 0;
  for (std::int64_t i = 0; i < dw.size(); ++i) {
    REQUIRE(dw[i] == Approx((*params[0].grad)[i]).margin(1e-5));
    if (dw[i] != 0.0f) ++nonzero;
  }
  CHECK(nonzero > dw.size() / 2);
  for (std::int64_t f = 0; f < db.size(); ++f)
    REQUIRE(db[f] == Approx((*params[1].grad)[f]).margin(1e-5));
  // An evaluation pass records no window choices: a backward pass after it refuses, rather than
  // reading an earlier batch's.
  model.forward(x, false);
  CHECK_THROWS_AS(model.backward(x, grad_logits), std::logic_error);
}

TEST_CASE("in training the conv and its max pooling run a few samples at a time, as if whole",
          "[layers][conv][model]") {
  using strata::testing::layer;
  LayerSpec conv = layer(LayerKind::conv2d, "conv");
  conv.filters = 16;
  conv.kernel = 3;
  // 3x3 windows: a pooling that the fused conv, ReLU and pooling kernel does not run, so that the
  // slices do.
  LayerSpec pool = layer(LayerKind::maxpool2d, "pool");
  pool.size = 3;
  pool.stride = 3;
  const std::vector<LayerSpec> specs = {conv, layer(LayerKind::relu, "relu"), pool,
                                        layer(LayerKind::flatten, "flat"),
                                        layer(LayerKind::dense, "fc", 4)};
  // 16 x 26 x 26 conv outputs, 43 KB a sample: 47 samples go through in 3 slices (a 1 MiB L2 or
  // more) to 6 (512 KiB).
  Model model(specs, {1, 28, 28}, 4, 9);
  Trace trace;
  model.set_trace(&trace);
  Rng rng(5);
  constexpr int batch = 47;
  const std::int64_t slices = batch * 16 * 26 * 26 * std::int64_t{sizeof(float)} /
                              strata::conv_pool_slice_bytes(strata::l2_cache_bytes());
  REQUIRE(slices >= 2);
  Tensor x({batch, 1, 28, 28}), grad_logits;
  strata::testing::fill_normal(x, rng);
  std::vector<std::int32_t> labels;
  for (int b = 0; b < batch; ++b) labels.push_back(b % 4);
  const Tensor logits = model.forward(x, true);
  const std::string events = trace.events_json(0, "test");
  std::size_t conv_events = 0;
  for (auto at = events.find("forward conv\""); at != std::string::npos;
       at = events.find("forward conv\"", at + 1))
    ++conv_events;
  CHECK(conv_events == static_cast<std::size_t>(slices));
  CHECK_THAT(dynamic_cast<Conv2DLayer&>(model.layer(0)).implementation(),
             !Catch::Contains("fused conv"));
  auto& pooling = dynamic_cast<Pool2DLayer&>(model.layer(1));
  const std::vector<std::uint8_t> sliced_maxima = pooling.first_maxima();
  softmax_cross_entropy(logits, labels, grad_logits);
  model.backward(x, grad_logits);
  const std::vector<Param> params = model.params_of(0);
  const Tensor dw = *params[0].grad, db = *params[1].grad;

  // The layers one by one on the whole batch, then their own backward passes.
  std::vector<Tensor> out(model.layer_count()), grad(model.layer_count());
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    model.layer(i).forward(i == 0 ? x : out[i - 1], out[i], true);
  REQUIRE(out.back().size() == logits.size());
  for (std::int64_t i = 0; i < logits.size(); ++i) REQUIRE(logits[i] == Approx(out.back()[i]));
  CHECK(pooling.first_maxima() == sliced_maxima);
  for (std::size_t i = model.layer_count(); i-- > 0;) {
    const Tensor& grad_out = i + 1 == model.layer_count() ? grad_logits : grad[i];
    model.layer(i).backward(i == 0 ? x : out[i - 1], out[i], grad_out,
                            i == 0 ? nullptr : &grad[i - 1]);
  }
  for (std::int64_t i = 0; i < dw.size(); ++i)
    REQUIRE(dw[i] == Approx((*params[0].grad)[i]).margin(1e-5));
  for (std::int64_t f = 0; f < db.size(); ++f)
    REQUIRE(db[f] == Approx((*params[1].grad)[f]).margin(1e-5));
}

TEST_CASE("the conv's slices before its pooling take 5/8 of the L2, at most 640 KiB",
          "[layers][conv][model]") {
  CHECK(strata::conv_pool_slice_bytes(512 << 10) == 320 << 10);
  CHECK(strata::conv_pool_slice_bytes(1 << 20) == 640 << 10);
  CHECK(strata::conv_pool_slice_bytes(2 << 20) == 640 << 10);
  CHECK(strata::l2_cache_bytes() >= 32 << 10);
}

TEST_CASE("a max pooling refuses a slice that does not fit the batch it began", "[layers][pool]") {
  Pool2DLayer pool("pool", Pool2DLayer::Mode::max, 2, 2);
  pool.build({1, 4, 4});
  Tensor x({2, 1, 4, 4}), pooled;
  x.fill(1.0f);
  pool.forward_slice(x, pooled, 0, 3, true);
  CHECK(pooled.dim(0) == 3);
  CHECK_THROWS_AS(pool.forward_slice(x, pooled, 2, 3, true), std::logic_error);
  Tensor blocked({2, 8, 4, 4});
  blocked.resize({2, 8, 4, 4}, Layout::channel_blocked8);
  Pool2DLayer wide("wide", Pool2DLayer::Mode::max, 2, 2);
  wide.build({8, 4, 4});
  wide.forward_slice(blocked, pooled, 0, 4, true);
  Tensor plain({2, 8, 4, 4});
  CHECK_THROWS_AS(wide.forward_slice(plain, pooled, 2, 4, true), std::logic_error);
}
