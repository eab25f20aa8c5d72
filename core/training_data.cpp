#include "core/training_data.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include <fmt/format.h>

#include "core/errors.hpp"

#include "core/rng.hpp"

namespace strata {

namespace {

// What one stored pixel is in the [0,1] units the statistics use: uint8 / 255, a float32 as it is.
constexpr float unit_of(std::uint8_t) {
  return 1.0f / 255.0f;
}
constexpr float unit_of(float) {
  return 1.0f;
}

// One sample's `size` stored pixels, standardised into `dst`.
template <typename Pixel>
void standardise(const Pixel* src, std::int64_t size, float mean, float stddev, float* dst) {
  const float scale = unit_of(Pixel{}) / stddev, shift = mean / stddev;
  for (std::int64_t i = 0; i < size; ++i) dst[i] = static_cast<float>(src[i]) * scale - shift;
}

SampleSet to_samples(const LabeledImages& images, std::span<const std::int64_t> rows, float mean,
                     float stddev) {
  SampleSet set;
  const std::int64_t size = images.sample_size();
  set.images = Tensor(
      {static_cast<std::int64_t>(rows.size()), images.channels, images.height, images.width});
  set.labels.resize(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    float* dst = set.images.data() + static_cast<std::int64_t>(r) * size;
    if (images.real())
      standardise(images.real_pixels.data() + rows[r] * size, size, mean, stddev, dst);
    else
      standardise(images.pixels.data() + rows[r] * size, size, mean, stddev, dst);
    set.labels[r] = images.labels[static_cast<std::size_t>(rows[r])];
  }
  return set;
}

std::vector<std::int64_t> iota_rows(std::int64_t n) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

struct Statistics {
  float mean = 0.0f, stddev = 1.0f;
};

// Accumulates pixel sums row by row, in the order of `rows`, the same arithmetic in memory and
// shards mode.
class PixelMoments {
 public:
  template <typename Pixel>
  void add(const Pixel* pixels, std::int64_t size) {
    constexpr double unit = std::is_same_v<Pixel, std::uint8_t> ? 255.0 : 1.0;
    for (std::int64_t i = 0; i < size; ++i) {
      const double v = pixels[i] / unit;
      sum_ += v;
      sum_sq_ += v * v;
    }
    n_ += static_cast<double>(size);
  }
  Statistics result() const {
    if (n_ == 0) return {};
    const double mean = sum_ / n_, variance = sum_sq_ / n_ - mean * mean;
    return {static_cast<float>(mean), static_cast<float>(std::sqrt(std::max(variance, 1e-12)))};
  }

 private:
  double sum_ = 0.0, sum_sq_ = 0.0, n_ = 0.0;
};

// The held-out split of rows [0, n): the same seeded choice in memory and shards mode.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> split_rows(std::int64_t n,
                                                                           double fraction,
                                                                           std::uint64_t seed) {
  const auto order = shuffled_indices(n, seed);
  const auto held_out = static_cast<std::int64_t>(std::floor(fraction * static_cast<double>(n)));
  std::vector<std::int64_t> train(order.begin(), order.end() - held_out),
      validation(order.end() - held_out, order.end());
  // Keep the file order inside each part so that the split is the only thing the seed changes.
  std::sort(train.begin(), train.end());
  std::sort(validation.begin(), validation.end());
  return {std::move(train), std::move(validation)};
}

void check_labels(const std::string& path, const std::vector<std::uint8_t>& labels, int classes) {
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= classes)
      throw DataError(fmt::format("{}: training labels: label {} is not below num_classes {}", path,
                                  labels[i], classes));
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
                                   std::uint64_t split_seed, const Normalisation* given) {
  TrainingData data;
  const LabeledImages& train = dataset.train;
  data.sample_shape = {train.channels, train.height, train.width};
  data.num_classes = dataset.num_classes;

  const auto [train_rows, validation_rows] =
      split_rows(train.count, validation_fraction, split_seed);
  if (given != nullptr) {
    data.mean = given->mean;
    data.stddev = given->stddev;
  } else {
    PixelMoments moments;
    const std::int64_t size = train.sample_size();
    for (auto row : train_rows)
      if (train.real())
        moments.add(train.real_pixels.data() + row * size, size);
      else
        moments.add(train.pixels.data() + row * size, size);
    const Statistics stats = moments.result();
    data.mean = stats.mean;
    data.stddev = stats.stddev;
  }

  data.train = to_samples(train, train_rows, data.mean, data.stddev);
  data.validation = to_samples(train, validation_rows, data.mean, data.stddev);
  data.test = to_samples(dataset.test, iota_rows(dataset.test.count), data.mean, data.stddev);
  return data;
}

namespace {

// Only the first rows' shapes, the statistics pass and the held-out rows are read here; training
// batches come from the file as each step needs them.
TrainingData load_sharded(const Config& config, const Normalisation* given) {
  const DataConfig& d = config.data;
  const DatasetNames& names = d.names;
  const Dataset head =
      read_dataset(d.path, 1, d.test_subset, names);  // checks the layout; the test split whole
  const h5::File file = h5::File::open_read(d.path);
  const bool real = head.train.real();
  std::int64_t n = file.shape(names.images_of("train")).at(0);
  if (d.train_subset > 0) n = std::min<std::int64_t>(n, d.train_subset);
  auto [train_rows, validation_rows] =
      split_rows(n, d.validation_fraction, derive_seed(config.run.seed, {seed_split}));

  TrainingData data;
  data.sample_shape = {head.train.channels, head.train.height, head.train.width};
  data.num_classes = head.num_classes;
  const std::int64_t size = head.train.sample_size();
  if (given != nullptr) {
    data.mean = given->mean;
    data.stddev = given->stddev;
  } else {
    PixelMoments moments;
    std::vector<std::uint8_t> chunk;
    std::vector<float> real_chunk;
    constexpr std::size_t chunk_rows = 4096;
    for (std::size_t first = 0; first < train_rows.size(); first += chunk_rows) {
      const auto rows =
          std::span(train_rows).subspan(first, std::min(chunk_rows, train_rows.size() - first));
      if (real) {
        file.read_f32_rows(names.images_of("train"), rows, real_chunk);
        check_finite_pixels(d.path, names.images_of("train"), real_chunk, size);
      } else {
        file.read_u8_rows(names.images_of("train"), rows, chunk);
      }
      for (std::size_t r = 0; r < rows.size(); ++r)
        if (real)
          moments.add(real_chunk.data() + static_cast<std::int64_t>(r) * size, size);
        else
          moments.add(chunk.data() + static_cast<std::int64_t>(r) * size, size);
    }
    const Statistics stats = moments.result();
    data.mean = stats.mean;
    data.stddev = stats.stddev;
  }

  LabeledImages held_out = head.train;
  held_out.count = static_cast<std::int64_t>(validation_rows.size());
  if (real) {
    file.read_f32_rows(names.images_of("train"), validation_rows, held_out.real_pixels);
    check_finite_pixels(d.path, names.images_of("train"), held_out.real_pixels, size);
  } else {
    file.read_u8_rows(names.images_of("train"), validation_rows, held_out.pixels);
  }
  // Every training label, once: the batches then read them as bytes, which would clip.
  std::vector<std::uint8_t> train_labels = read_split_labels(d.path, "train", names);
  train_labels.resize(static_cast<std::size_t>(n));
  check_labels(d.path, train_labels, head.num_classes);
  file.read_u8_rows(names.labels_of("train"), validation_rows, held_out.labels);
  std::vector<std::int64_t> all(validation_rows.size());
  std::iota(all.begin(), all.end(), 0);
  data.validation = to_samples(held_out, all, data.mean, data.stddev);
  std::vector<std::int64_t> test_rows(static_cast<std::size_t>(head.test.count));
  std::iota(test_rows.begin(), test_rows.end(), 0);
  data.test = to_samples(head.test, test_rows, data.mean, data.stddev);
  data.train.reader = std::make_shared<const ShardReader>(
      d.path, names, std::move(train_rows), data.sample_shape, data.mean, data.stddev);
  return data;
}

}  // namespace

ShardReader::ShardReader(const std::string& path, const DatasetNames& names,
                         std::vector<std::int64_t> file_rows, Shape sample_shape, float mean,
                         float stddev)
    : file_(h5::File::open_read(path)),
      images_(names.images_of("train")),
      labels_(names.labels_of("train")),
      real_(file_.element_type(images_).kind == H5T_FLOAT),
      file_rows_(std::move(file_rows)),
      sample_shape_(std::move(sample_shape)),
      mean_(mean),
      stddev_(stddev) {}

void ShardReader::read(std::span<const std::int64_t> positions, Tensor& images,
                       std::vector<std::int32_t>& labels) const {
  // HDF5 returns a union of rows in file order; read them sorted, then place each where asked.
  order_.resize(positions.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    return file_rows_[positions[a]] < file_rows_[positions[b]];
  });
  wanted_.resize(positions.size());
  for (std::size_t i = 0; i < order_.size(); ++i)
    wanted_[i] = file_rows_[static_cast<std::size_t>(positions[order_[i]])];
  if (real_) {
    file_.read_f32_rows(images_, wanted_, real_pixels_);
    check_finite_pixels(file_.path(), images_, real_pixels_, element_count(sample_shape_));
  } else {
    file_.read_u8_rows(images_, wanted_, pixels_);
  }
  file_.read_u8_rows(labels_, wanted_, label_bytes_);
  rows_read_ += static_cast<std::int64_t>(positions.size());

  Shape shape{static_cast<std::int64_t>(positions.size())};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  images.resize(shape);
  labels.resize(positions.size());
  const std::int64_t size = element_count(sample_shape_);
  for (std::size_t i = 0; i < order_.size(); ++i) {
    const std::int64_t at = static_cast<std::int64_t>(i) * size;
    float* dst = images.data() + static_cast<std::int64_t>(order_[i]) * size;
    if (real_)
      standardise(real_pixels_.data() + at, size, mean_, stddev_, dst);
    else
      standardise(pixels_.data() + at, size, mean_, stddev_, dst);
    labels[order_[i]] = label_bytes_[i];
  }
}

TrainingData load_training_data(const Config& config, const Normalisation* given) {
  const DataConfig& d = config.data;
  const bool subset = !d.classes.empty() || d.samples_per_class > 0;
  if (d.source == DataSource::hdf5 && d.read == DataRead::shards) {
    if (subset)
      throw ConfigError(fmt::format(
          "{}: data.classes and data.samples_per_class select samples in memory: set data.read: "
          "memory",
          config.file));
    return load_sharded(config, given);
  }
  Dataset dataset =
      d.source == DataSource::synthetic
          ? make_synthetic(d.synthetic, derive_seed(config.run.seed, {seed_synthetic}))
          : read_dataset(d.path, d.train_subset, d.test_subset, d.names);
  TrainingData data = prepare_training_data(dataset, d.validation_fraction,
                                            derive_seed(config.run.seed, {seed_split}), given);
  if (subset) {
    std::vector<int> classes = d.classes;
    if (classes.empty())
      for (int c = 0; c < data.num_classes; ++c) classes.push_back(c);
    for (int c : classes)
      if (c >= data.num_classes)
        throw ConfigError(
            fmt::format("{}: data.classes: class {} is not below the data's {} classes",
                        config.file, c, data.num_classes));
    select_classes(data, classes, d.samples_per_class,
                   derive_seed(config.run.seed, {seed_split, 1}));
  }
  return data;
}

namespace {

void keep_classes(SampleSet& set, const std::vector<int>& position_of, std::int64_t sample_size,
                  const std::vector<std::int64_t>& order, int per_class, int classes) {
  std::vector<int> taken(static_cast<std::size_t>(classes), 0);
  std::vector<std::int64_t> rows;
  for (std::int64_t r : order) {
    const int c = position_of[static_cast<std::size_t>(set.labels[static_cast<std::size_t>(r)])];
    if (c < 0 || (per_class > 0 && taken[static_cast<std::size_t>(c)] >= per_class)) continue;
    ++taken[static_cast<std::size_t>(c)];
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end());  // file order, whichever rows the shuffle chose
  SampleSet out;
  Shape shape = set.images.shape();
  shape[0] = static_cast<std::int64_t>(rows.size());
  out.images = Tensor(shape);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(set.images.data() + rows[i] * sample_size, sample_size,
                out.images.data() + static_cast<std::int64_t>(i) * sample_size);
    out.labels.push_back(
        position_of[static_cast<std::size_t>(set.labels[static_cast<std::size_t>(rows[i])])]);
  }
  set = std::move(out);
}

}  // namespace

void select_classes(TrainingData& data, const std::vector<int>& classes, int samples_per_class,
                    std::uint64_t seed) {
  std::vector<int> position_of(static_cast<std::size_t>(data.num_classes), -1);
  for (std::size_t i = 0; i < classes.size(); ++i)
    position_of[static_cast<std::size_t>(classes[i])] = static_cast<int>(i);
  const std::int64_t size = element_count(data.sample_shape);
  const int k = static_cast<int>(classes.size());
  keep_classes(data.train, position_of, size, shuffled_indices(data.train.count(), seed),
               samples_per_class, k);
  if (samples_per_class > 0) {
    std::vector<int> count(static_cast<std::size_t>(k), 0);
    for (int label : data.train.labels) ++count[static_cast<std::size_t>(label)];
    for (int c = 0; c < k; ++c)
      if (count[static_cast<std::size_t>(c)] < samples_per_class)
        throw DataError(fmt::format(
            "data.samples_per_class {}: class {} has only {} training samples", samples_per_class,
            classes[static_cast<std::size_t>(c)], count[static_cast<std::size_t>(c)]));
  }
  keep_classes(data.validation, position_of, size, iota_rows(data.validation.count()), 0, k);
  keep_classes(data.test, position_of, size, iota_rows(data.test.count()), 0, k);
  data.num_classes = k;
}

void gather_batch(const SampleSet& set, std::span<const std::int64_t> indices, Tensor& images,
                  std::vector<std::int32_t>& labels) {
  if (set.reader) {
    set.reader->read(indices, images, labels);
    return;
  }
  size_batch(set, static_cast<std::int64_t>(indices.size()), images, labels);
  gather_rows(set, indices, 0, images, labels);
}

void size_batch(const SampleSet& set, std::int64_t count, Tensor& images,
                std::vector<std::int32_t>& labels) {
  Shape shape = set.images.shape();
  shape[0] = count;
  images.resize(shape);
  labels.resize(static_cast<std::size_t>(count));
}

void gather_rows(const SampleSet& set, std::span<const std::int64_t> indices,
                 std::int64_t first_row, Tensor& images, std::vector<std::int32_t>& labels) {
  const std::int64_t size =
      element_count(set.images.shape()) / std::max<std::int64_t>(set.images.dim(0), 1);
  for (std::size_t r = 0; r < indices.size(); ++r) {
    const std::int64_t row = first_row + static_cast<std::int64_t>(r);
    const float* src = set.images.data() + indices[r] * size;
    std::copy(src, src + size, images.data() + row * size);
    labels[static_cast<std::size_t>(row)] = set.labels[static_cast<std::size_t>(indices[r])];
  }
}

}  // namespace strata
