#include "core/conv_weight_grad.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/channel_lanes.hpp"

namespace strata {

namespace {

// The outputs o in [first, last) whose input o * stride + tap - padding lies in [0, extent).
struct Span {
  std::int64_t first, last;
};
Span valid_outputs(std::int64_t tap, std::int64_t stride, std::int64_t padding, std::int64_t extent,
                   std::int64_t outputs) {
  const std::int64_t shift = padding - tap;  // input = o * stride - shift
  const std::int64_t first = shift > 0 ? (shift + stride - 1) / stride : 0;
  // A tap wholly in the far padding reads no input (and / rounds toward zero, not down).
  const std::int64_t top = extent - 1 + shift;
  const std::int64_t last = top < 0 ? 0 : std::min(outputs, top / stride + 1);
  return {first, std::max(first, last)};
}

// One kernel row's K taps (K known at compile time) against one output row: K independent sums,
// so that the additions do not wait on each other. `in_row` is the input row the taps read;
// sums[kw] += sum over outputs ow of in_row[ow * stride + kw - padding] * dy_row[ow].
// `each[kw]`: the outputs whose input for tap kw lies inside the row; `all`: those of every tap.
template <class V, int K>
void accumulate_taps(const float* in_row, const float* dy_row, const ConvGeometry& g,
                     const Span* each, Span all, V* sums) {
  constexpr std::int64_t L = sizeof(V) / sizeof(float);
  V acc[K];
  for (int kw = 0; kw < K; ++kw) acc[kw] = V{} * 0.0f;
  for (std::int64_t ow = all.first; ow < all.last; ++ow) {
    const V dy = load_lanes<V>(dy_row + ow * L);
    const float* x = in_row + ow * g.stride - g.padding;
    for (int kw = 0; kw < K; ++kw) acc[kw] += x[kw] * dy;
  }
  for (int kw = 0; kw < K; ++kw) {
    const auto edge = [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t ow = first; ow < last; ++ow)
        acc[kw] += in_row[ow * g.stride + kw - g.padding] * load_lanes<V>(dy_row + ow * L);
    };
    if (all.first >= all.last) {
      edge(each[kw].first, each[kw].last);
    } else {
      edge(each[kw].first, std::min(each[kw].last, all.first));
      edge(std::max(each[kw].first, all.last), each[kw].last);
    }
    sums[kw] += acc[kw];
  }
}

// One sample's output-gradient block (L filters) against each kernel tap of each input channel:
// sums[(c * k + kh) * k + kw] += sum over outputs of x[input of the tap] * dy[output]. K: the
// kernel's width, or 0 for any width (one tap at a time, slower).
template <class V, int K>
void accumulate_block(const float* x, const float* dy_block, const ConvGeometry& g, V* sums) {
  constexpr std::int64_t L = sizeof(V) / sizeof(float);
  const std::int64_t k = g.kernel;
  // Worked out once here, not per row: each takes a division.
  std::vector<Span> each(static_cast<std::size_t>(k));
  Span all{0, g.out_w};
  for (std::int64_t kw = 0; kw < k; ++kw) {
    each[static_cast<std::size_t>(kw)] = valid_outputs(kw, g.stride, g.padding, g.in_w, g.out_w);
    all.first = std::max(all.first, each[static_cast<std::size_t>(kw)].first);
    all.last = std::min(all.last, each[static_cast<std::size_t>(kw)].last);
  }
  for (std::int64_t c = 0; c < g.channels; ++c) {
    const float* plane = x + c * g.in_h * g.in_w;
    for (std::int64_t kh = 0; kh < k; ++kh) {
      const Span rows = valid_outputs(kh, g.stride, g.padding, g.in_h, g.out_h);
      V* row_sums = sums + (c * k + kh) * k;
      for (std::int64_t oh = rows.first; oh < rows.last; ++oh) {
        const float* in_row = plane + (oh * g.stride + kh - g.padding) * g.in_w;
        const float* dy_row = dy_block + oh * g.out_w * L;
        if constexpr (K > 0) {
          accumulate_taps<V, K>(in_row, dy_row, g, each.data(), all, row_sums);
        } else {
          for (std::int64_t kw = 0; kw < k; ++kw) {
            const Span cols = each[static_cast<std::size_t>(kw)];
            for (std::int64_t ow = cols.first; ow < cols.last; ++ow)
              row_sums[kw] +=
                  in_row[ow * g.stride + kw - g.padding] * load_lanes<V>(dy_row + ow * L);
          }
        }
      }
    }
  }
}

template <class V>
void accumulate_block_any(const float* x, const float* dy_block, const ConvGeometry& g, V* sums) {
  // The common odd widths get their taps as independent sums; any other goes tap by tap.
  switch (g.kernel) {
    case 3:
      return accumulate_block<V, 3>(x, dy_block, g, sums);
    case 5:
      return accumulate_block<V, 5>(x, dy_block, g, sums);
    case 7:
      return accumulate_block<V, 7>(x, dy_block, g, sums);
    default:
      return accumulate_block<V, 0>(x, dy_block, g, sums);
  }
}

template <class V>
void weight_grad(const float* x, const float* dy, const ConvGeometry& g, float* dw, float* db) {
  constexpr std::int64_t L = sizeof(V) / sizeof(float);
  const std::int64_t blocks = g.filters / L, taps = g.channels * g.kernel * g.kernel;
  const std::int64_t in_sample = g.channels * g.in_h * g.in_w, plane = g.out_h * g.out_w;
  std::vector<V> sums(static_cast<std::size_t>(blocks * taps), V{} * 0.0f);
  std::vector<V> bias(static_cast<std::size_t>(blocks), V{} * 0.0f);
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const float* dy_block = dy + (n * blocks + b) * plane * L;
      accumulate_block_any<V>(x + n * in_sample, dy_block, g,
                              &sums[static_cast<std::size_t>(b * taps)]);
      V total = V{} * 0.0f;
      for (std::int64_t p = 0; p < plane; ++p) total += load_lanes<V>(dy_block + p * L);
      bias[static_cast<std::size_t>(b)] += total;
    }
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (std::int64_t lane = 0; lane < L; ++lane) {
      const std::int64_t filter = b * L + lane;
      for (std::int64_t t = 0; t < taps; ++t)
        dw[filter * taps + t] = sums[static_cast<std::size_t>(b * taps + t)][lane];
      db[filter] = bias[static_cast<std::size_t>(b)][lane];
    }
  }
}

}  // namespace

void few_channel_weight_grad(const float* x, const float* dy, const ConvGeometry& g,
                             std::int64_t lanes, float* dw, float* db) {
  if ((lanes != 8 && lanes != 16) || g.filters % lanes != 0)
    throw std::invalid_argument("few_channel_weight_grad: " + std::to_string(g.filters) +
                                " filters in blocks of " + std::to_string(lanes));
  if (lanes == 8)
    weight_grad<Lanes8>(x, dy, g, dw, db);
  else
    weight_grad<Lanes16>(x, dy, g, dw, db);
}

}  // namespace strata
