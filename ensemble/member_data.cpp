#include "ensemble/member_data.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/rng.hpp"

namespace strata {

namespace {

// A copy of the rows `rows` of an in-memory set.
SampleSet rows_of(const SampleSet& set, const std::vector<std::int64_t>& rows) {
  const Shape& shape = set.images.shape();
  const std::int64_t size = shape[1] * shape[2] * shape[3];
  SampleSet out;
  out.images = Tensor({static_cast<std::int64_t>(rows.size()), shape[1], shape[2], shape[3]});
  out.labels.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(set.images.data() + rows[i] * size, size,
                out.images.data() + static_cast<std::int64_t>(i) * size);
    out.labels[i] = set.labels[static_cast<std::size_t>(rows[i])];
  }
  return out;
}

void mask(SampleSet& set, const FeatureSubset& f) {
  if (set.count() == 0) return;
  const Shape& shape = set.images.shape();
  const std::int64_t channels = shape[1], height = shape[2], width = shape[3];
  const int row_end = f.row_end > 0 ? f.row_end : static_cast<int>(height);
  const int col_end = f.col_end > 0 ? f.col_end : static_cast<int>(width);
  std::vector<bool> channel_kept(static_cast<std::size_t>(channels), f.channels.empty());
  for (int c : f.channels) channel_kept[static_cast<std::size_t>(c)] = true;
  float* pixel = set.images.data();
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t y = 0; y < height; ++y)
        for (std::int64_t x = 0; x < width; ++x, ++pixel) {
          const bool inside = channel_kept[static_cast<std::size_t>(c)] && y >= f.row_begin &&
                              y < row_end && x >= f.col_begin && x < col_end;
          if (!inside) *pixel = 0.0f;
        }
}

}  // namespace

TrainingData bootstrap_sample(const TrainingData& data, std::uint64_t seed) {
  if (data.train.reader)
    throw ConfigError(
        "ensemble bagging draws its bootstrap samples in memory: set data.read: memory");
  const std::int64_t n = data.train.count();
  Rng rng(seed);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  for (auto& r : rows) r = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n)));
  TrainingData out = data;
  out.train = rows_of(data.train, rows);
  return out;
}

void mask_features(TrainingData& data, const FeatureSubset& subset,
                   const std::string& config_file) {
  const auto fail = [&](const std::string& why) {
    throw ConfigError(fmt::format("{}:{}:{}: feature_subsets: {}", config_file, subset.mark.line,
                                  subset.mark.column, why));
  };
  if (data.train.reader) fail("masking needs the training set in memory: set data.read: memory");
  const Shape& s = data.sample_shape;
  if (subset.row_end > s[1] || subset.col_end > s[2])
    fail(fmt::format("rows [{}, {}) and cols [{}, {}) must lie inside the {}x{} images",
                     subset.row_begin, subset.row_end, subset.col_begin, subset.col_end, s[1],
                     s[2]));
  if (subset.row_end == 0 && subset.row_begin >= s[1]) fail("rows start beyond the image");
  if (subset.col_end == 0 && subset.col_begin >= s[2]) fail("cols start beyond the image");
  for (int c : subset.channels)
    if (c >= s[0]) fail(fmt::format("channel {} is not below the images' {} channels", c, s[0]));
  mask(data.train, subset);
  mask(data.validation, subset);
  mask(data.test, subset);
}

std::string describe(const FeatureSubset& f) {
  const auto range = [](int begin, int end) {
    return end > 0     ? fmt::format("{}-{}", begin, end)
           : begin > 0 ? fmt::format("{}-end", begin)
                       : std::string("all");
  };
  return fmt::format("rows {}, cols {}, channels {}", range(f.row_begin, f.row_end),
                     range(f.col_begin, f.col_end),
                     f.channels.empty() ? "all" : fmt::format("{}", fmt::join(f.channels, "+")));
}

}  // namespace strata
