#include "core/pooled_conv_weight_grad.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

namespace strata {

PooledConvWeightGradient::PooledConvWeightGradient(const ConvGeometry& g,
                                                   const MaxPoolWindows& pool)
    : g_(g), pool_(pool), padded_w_(g.in_w + 2 * g.padding + 8 * ((g.kernel + 7) / 8)) {
  const std::int64_t padded_h = g.in_h + 2 * g.padding;
  padded_x_.assign(static_cast<std::size_t>(g.channels * padded_h * padded_w_), 0.0f);
  for (std::int64_t c = 0; c < g.channels; ++c)
    for (std::int64_t kh = 0; kh < g.kernel; ++kh)
      for (std::int64_t kw = 0; kw < g.kernel; kw += 8)
        chunks_.push_back((c * padded_h + kh) * padded_w_ + kw);
  const auto windows = static_cast<std::size_t>(pool.out_h * pool.out_w * 16);
  chosen_grad_.resize(windows);
  chosen_at_.resize(windows);
  sums_.resize(static_cast<std::size_t>(g.filters) * chunks_.size());
}

void PooledConvWeightGradient::copy_padded_input(const float* x, Layout x_layout) {
  const std::int64_t lanes = channel_block(x_layout), padded_h = g_.in_h + 2 * g_.padding;
  for (std::int64_t c = 0; c < g_.channels; ++c) {
    const float* plane = x + (c / lanes) * g_.in_h * g_.in_w * lanes + c % lanes;
    float* to = padded_x_.data() + (c * padded_h + g_.padding) * padded_w_ + g_.padding;
    for (std::int64_t h = 0; h < g_.in_h; ++h)
      for (std::int64_t w = 0; w < g_.in_w; ++w)
        to[h * padded_w_ + w] = plane[(h * g_.in_w + w) * lanes];
  }
}

// For one block of V's lanes of one sample: each window's gradient and the output it goes to, as
// the pooling's first-maximum index says (none: the gradient is 0).
template <class V>
void PooledConvWeightGradient::choose_outputs(const std::uint8_t* first_max,
                                              const float* pooled_grad, float* db) {
  using Ints = LaneInts<V>;
  constexpr std::int64_t L = lane_count<V>();
  const V zero{};
  V bias_sum{};
  for (std::int64_t ph = 0; ph < pool_.out_h; ++ph)
    for (std::int64_t pw = 0; pw < pool_.out_w; ++pw) {
      const std::int64_t window = ph * pool_.out_w + pw;
      const Ints chosen = load_lane_bytes<V>(first_max + window * L);
      const V grad = load_lanes<V>(pooled_grad + window * L);
      V given = zero;
      Ints at{};
      for (std::int64_t kh = 0; kh < pool_.size; ++kh)
        for (std::int64_t kw = 0; kw < pool_.size; ++kw) {
          const std::int64_t oh = ph * pool_.stride + kh, ow = pw * pool_.stride + kw;
          const auto hit = chosen == static_cast<std::int32_t>(kh * pool_.size + kw);
          given = hit ? grad : given;
          const auto tap = static_cast<std::int32_t>(oh * g_.stride * padded_w_ + ow * g_.stride);
          at = hit ? Ints{} + tap : at;
        }
      bias_sum += given;
      std::memcpy(chosen_grad_.data() + window * L, &given, sizeof(V));
      std::memcpy(chosen_at_.data() + window * L, &at, sizeof(Ints));
    }
  float sums[L];
  std::memcpy(sums, &bias_sum, sizeof(V));
  for (std::int64_t l = 0; l < L; ++l) db[l] += sums[l];
}

namespace {

// sums[f][j] += grad[w + f] * (8 floats at x + at[w + f] + chunks[j]) over the windows w, for F
// neighbouring filters (lanes) at once: F * N sums held in registers across the windows (in memory
// they would form a store-to-load chain per window). One filter's N chains alone wait on the
// multiply-add's latency every window; a second filter's are independent of them, and each sum
// still adds its windows in order, so the result is the same to the bit. Every window adds, also
// those whose gradient is 0: a branch on it mispredicts more than the multiply-adds it would skip
// cost.
template <int F, int N>
void add_chunks(Lanes8* sums, std::int64_t filter_sums, const float* x, const std::int64_t* chunks,
                const float* grad, const std::int32_t* at, std::int64_t windows,
                std::int64_t step) {
  Lanes8 acc[F][N];
  for (int f = 0; f < F; ++f)
    for (int j = 0; j < N; ++j) acc[f][j] = sums[f * filter_sums + j];
  for (std::int64_t w = 0; w < windows; ++w)
    for (int f = 0; f < F; ++f) {
      const float g = grad[w * step + f];
      const float* first = x + at[w * step + f];
      for (int j = 0; j < N; ++j) acc[f][j] += g * load_lanes<Lanes8>(first + chunks[j]);
    }
  for (int f = 0; f < F; ++f)
    for (int j = 0; j < N; ++j) sums[f * filter_sums + j] = acc[f][j];
}

using AddChunks = void (*)(Lanes8*, std::int64_t, const float*, const std::int64_t*, const float*,
                           const std::int32_t*, std::int64_t, std::int64_t);
// add_chunks_of[n - 1] adds n chunks of one filter; add_chunk_pairs_of[n - 1] of two, up to the
// 12 sums that leave AVX2's 16 vector registers room for the loads.
constexpr std::array<AddChunks, 8> add_chunks_of = {
    add_chunks<1, 1>, add_chunks<1, 2>, add_chunks<1, 3>, add_chunks<1, 4>,
    add_chunks<1, 5>, add_chunks<1, 6>, add_chunks<1, 7>, add_chunks<1, 8>};
constexpr std::int64_t most_paired_chunks = 6;
constexpr std::array<AddChunks, most_paired_chunks> add_chunk_pairs_of = {
    add_chunks<2, 1>, add_chunks<2, 2>, add_chunks<2, 3>,
    add_chunks<2, 4>, add_chunks<2, 5>, add_chunks<2, 6>};

}  // namespace

// Adds `filters` (1 or 2) neighbouring filters' chosen outputs (lane `lane` on, of blocks of
// `lanes`) times their input taps, up to 8 chunks of taps at a time (6 for two filters).
void PooledConvWeightGradient::accumulate(std::int64_t filter, std::int64_t filters,
                                          std::int64_t lanes, std::int64_t lane) {
  const auto count = static_cast<std::int64_t>(chunks_.size());
  Lanes8* sums = sums_.data() + filter * count;
  const std::int64_t windows = pool_.out_h * pool_.out_w;
  const float* grad = chosen_grad_.data() + lane;
  const std::int32_t* at = chosen_at_.data() + lane;
  const float* x = padded_x_.data();
  const std::int64_t most = filters == 2 ? most_paired_chunks : 8;
  for (std::int64_t j = 0; j < count; j += most) {
    const std::int64_t n = std::min(most, count - j);
    const AddChunks add = filters == 2 ? add_chunk_pairs_of[n - 1] : add_chunks_of[n - 1];
    add(sums + j, count, x, chunks_.data() + j, grad, at, windows, lanes);
  }
}

void PooledConvWeightGradient::compute(std::int64_t batch, const float* x, Layout x_layout,
                                       const std::uint8_t* first_max, const float* pooled_grad,
                                       Layout y_layout, float* dw, float* db) {
  const std::int64_t lanes = channel_block(y_layout);
  if (g_.filters % lanes != 0)
    throw std::invalid_argument("PooledConvWeightGradient: filters " + std::to_string(g_.filters) +
                                " in blocks of " + std::to_string(lanes));
  std::fill(sums_.begin(), sums_.end(), Lanes8{});
  std::fill(db, db + g_.filters, 0.0f);
  const std::int64_t pooled_plane = pool_.out_h * pool_.out_w;
  const std::int64_t x_sample = g_.channels * g_.in_h * g_.in_w;
  for (std::int64_t n = 0; n < batch; ++n) {
    copy_padded_input(x + n * x_sample, x_layout);
    for (std::int64_t block = 0; block < g_.filters / lanes; ++block) {
      const std::int64_t first = (n * g_.filters / lanes + block) * pooled_plane * lanes;
      float* db_block = db + block * lanes;
      if (lanes == 16)
        choose_outputs<Lanes16>(first_max + first, pooled_grad + first, db_block);
      else if (lanes == 8)
        choose_outputs<Lanes8>(first_max + first, pooled_grad + first, db_block);
      else
        choose_outputs<float>(first_max + first, pooled_grad + first, db_block);
      for (std::int64_t lane = 0; lane < lanes; lane += 2) {
        const std::int64_t filters = std::min<std::int64_t>(2, lanes - lane);
        accumulate(block * lanes + lane, filters, lanes, lane);
      }
    }
  }
  // sums_ holds each kernel row in whole chunks of 8; dw's rows are `kernel` long.
  const std::int64_t rows = g_.channels * g_.kernel, row_chunks = (g_.kernel + 7) / 8;
  for (std::int64_t f = 0; f < g_.filters; ++f)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t kw = 0; kw < g_.kernel; ++kw)
        dw[(f * rows + r) * g_.kernel + kw] =
            sums_[static_cast<std::size_t>((f * rows + r) * row_chunks + kw / 8)][kw % 8];
}

}  // namespace strata
