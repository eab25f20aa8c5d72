#include "core/training_data.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng.hpp"

namespace strata {

namespace {

SampleSet to_samples(const LabeledImages& images, std::span<const std::int64_t> rows, float mean,
                     float stddev) {
  SampleSet set;
  const std::int64_t size = images.sample_size();
  set.images = Tensor(
      {static_cast<std::int64_t>(rows.size()), images.channels, images.height, images.width});
  set.labels.resize(rows.size());
  const float scale = 1.0f / (255.0f * stddev), shift = mean / stddev;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::uint8_t* src = images.pixels.data() + rows[r] * size;
    float* dst = set.images.data() + static_cast<std::int64_t>(r) * size;
    for (std::int64_t i = 0; i < size; ++i) dst[i] = static_cast<float>(src[i]) * scale - shift;
    set.labels[r] = images.labels[static_cast<std::size_t>(rows[r])];
  }
  return set;
}

std::vector<std::int64_t> iota_rows(std::int64_t n) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

}  // namespace

std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed) {
  auto order = iota_rows(n);
  Rng rng(seed);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)],
              order[rng.below(static_cast<std::uint64_t>(i + 1))]);
  return order;
}

TrainingData prepare_training_data(const Dataset& dataset, double validation_fraction,
                                   std::uint64_t split_seed) {
  TrainingData data;
  const LabeledImages& train = dataset.train;
  data.sample_shape = {train.channels, train.height, train.width};
  data.num_classes = dataset.num_classes;

  const auto order = shuffled_indices(train.count, split_seed);
  const auto held_out =
      static_cast<std::int64_t>(std::floor(validation_fraction * static_cast<double>(train.count)));
  std::vector<std::int64_t> train_rows(order.begin(), order.end() - held_out);
  std::vector<std::int64_t> validation_rows(order.end() - held_out, order.end());
  // Keep the original file order inside each part so that the split is the only thing the seed
  // changes.
  std::sort(train_rows.begin(), train_rows.end());
  std::sort(validation_rows.begin(), validation_rows.end());

  double sum = 0.0, sum_sq = 0.0;
  const std::int64_t size = train.sample_size();
  for (auto row : train_rows)
    for (std::int64_t i = 0; i < size; ++i) {
      const double v = train.pixels[static_cast<std::size_t>(row * size + i)] / 255.0;
      sum += v;
      sum_sq += v * v;
    }
  const double n = static_cast<double>(train_rows.size() * static_cast<std::size_t>(size));
  data.mean = n > 0 ? static_cast<float>(sum / n) : 0.0f;
  const double variance = n > 0 ? sum_sq / n - (sum / n) * (sum / n) : 1.0;
  data.stddev = static_cast<float>(std::sqrt(std::max(variance, 1e-12)));

  data.train = to_samples(train, train_rows, data.mean, data.stddev);
  data.validation = to_samples(train, validation_rows, data.mean, data.stddev);
  data.test = to_samples(dataset.test, iota_rows(dataset.test.count), data.mean, data.stddev);
  return data;
}

TrainingData load_training_data(const Config& config) {
  const DataConfig& d = config.data;
  Dataset dataset =
      d.source == DataSource::synthetic
          ? make_synthetic(d.synthetic, derive_seed(config.run.seed, {seed_synthetic}))
          : read_dataset(d.path, d.train_subset, d.test_subset);
  return prepare_training_data(dataset, d.validation_fraction,
                               derive_seed(config.run.seed, {seed_split}));
}

void gather_batch(const SampleSet& set, std::span<const std::int64_t> indices, Tensor& images,
                  std::vector<std::int32_t>& labels) {
  Shape shape = set.images.shape();
  const std::int64_t size = element_count(shape) / std::max<std::int64_t>(shape[0], 1);
  shape[0] = static_cast<std::int64_t>(indices.size());
  images.resize(shape);
  labels.resize(indices.size());
  for (std::size_t r = 0; r < indices.size(); ++r) {
    const float* src = set.images.data() + indices[r] * size;
    std::copy(src, src + size, images.data() + static_cast<std::int64_t>(r) * size);
    labels[r] = set.labels[static_cast<std::size_t>(indices[r])];
  }
}

}  // namespace strata
