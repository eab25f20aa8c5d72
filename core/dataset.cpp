#include "core/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/hdf5_file.hpp"
#include "core/rng.hpp"

namespace strata {

namespace {

constexpr std::int64_t kMinClasses = 2;
constexpr std::int64_t kMaxClasses = 256;  // labels are uint8
// Image edges beyond this are certainly a damaged or foreign file, and keep C*H*W far from
// overflow.
constexpr std::int64_t kMaxImageEdge = 1 << 16;

const DatasetNames default_names;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw DataError(fmt::format("{}: {}", path, problem));
}

// ---- reading ----

// Labels of any integer type, checked to be class numbers before they become bytes (HDF5 would
// clip -1 to 0 and 300 to 255 without a word).
std::vector<std::uint8_t> read_labels(const h5::File& file, const std::string& name,
                                      std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> wide;
  file.read_i64(name, wide, first, count);
  std::vector<std::uint8_t> labels(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < 0 || wide[i] >= kMaxClasses)
      fail(file.path(),
           fmt::format("{}: label {} at index {} is not a class number in [0, {})", name, wide[i],
                       first + static_cast<std::int64_t>(i), kMaxClasses));
    labels[i] = static_cast<std::uint8_t>(wide[i]);
  }
  return labels;
}

std::int64_t read_num_classes(const h5::File& file, const DatasetNames& names) {
  if (!file.has_attr("/", "num_classes")) {
    // Derived: the largest label of either split, plus one (labels are a byte each, so reading
    // them whole is cheap).
    std::int64_t largest = -1;
    for (const char* split : {"train", "test"}) {
      const std::string name = names.labels_of(split);
      if (!file.exists(name)) fail(file.path(), name + " is missing");
      for (const auto l : read_labels(file, name, 0, -1))
        largest = std::max<std::int64_t>(largest, l);
    }
    if (largest + 1 < kMinClasses)
      fail(file.path(), fmt::format("no root attribute num_classes, and the labels hold {} "
                                    "class(es); a classifier needs at least {}",
                                    largest + 1, kMinClasses));
    return largest + 1;
  }
  const std::int64_t classes = file.read_attr_int("/", "num_classes");
  if (classes < kMinClasses || classes > kMaxClasses) {
    fail(file.path(), fmt::format("root attribute num_classes is {}, expected a value in [{}, {}]",
                                  classes, kMinClasses, kMaxClasses));
  }
  return classes;
}

std::vector<std::int64_t> require_dataset(const h5::File& file, const std::string& name) {
  if (!file.exists(name)) fail(file.path(), name + " is missing");
  return file.shape(name);
}

// Fills count, channels, height and width from the images' shape, checking it.
void read_image_shape(const h5::File& file, const std::string& name, LabeledImages& split) {
  const std::vector<std::int64_t> shape = require_dataset(file, name);
  if (shape.size() != 3 && shape.size() != 4) {
    fail(file.path(),
         fmt::format("{} has rank {}, expected 3 [N,H,W] or 4 [N,C,H,W]", name, shape.size()));
  }
  const bool has_channels = shape.size() == 4;
  const std::int64_t channels = has_channels ? shape[1] : 1;
  const std::int64_t height = shape[shape.size() - 2];
  const std::int64_t width = shape[shape.size() - 1];
  if (shape[0] == 0) fail(file.path(), name + " has no samples");
  for (const auto edge : {channels, height, width}) {
    if (edge < 1 || edge > kMaxImageEdge) {
      fail(file.path(), fmt::format("{} has shape {}, whose image dimensions are not in [1, {}]",
                                    name, fmt::join(shape, "x"), kMaxImageEdge));
    }
  }
  split.count = shape[0];
  split.channels = static_cast<int>(channels);
  split.height = static_cast<int>(height);
  split.width = static_cast<int>(width);
}

void check_labels(const std::string& path, const std::string& name,
                  const std::vector<std::uint8_t>& labels, std::int64_t num_classes) {
  const auto bad =
      std::find_if(labels.begin(), labels.end(), [&](auto l) { return l >= num_classes; });
  if (bad != labels.end()) {
    fail(path, fmt::format("{}: label {} at index {} is not below num_classes {}", name, *bad,
                           bad - labels.begin(), num_classes));
  }
}

LabeledImages read_split(const h5::File& file, const std::string& split_name, std::int64_t limit,
                         std::int64_t num_classes, const DatasetNames& names) {
  const std::string images = names.images_of(split_name);
  const std::string labels = names.labels_of(split_name);
  LabeledImages split;
  read_image_shape(file, images, split);

  const std::vector<std::int64_t> label_shape = require_dataset(file, labels);
  if (label_shape.size() != 1) {
    fail(file.path(), fmt::format("{} has rank {}, expected 1 [N]", labels, label_shape.size()));
  }
  if (label_shape[0] != split.count) {
    fail(file.path(), fmt::format("{} has {} entries but {} has {}", labels, label_shape[0], images,
                                  split.count));
  }

  if (limit > 0) split.count = std::min(limit, split.count);
  const h5::File::ElementType type = file.element_type(images);
  switch (type.kind) {
    case H5T_INTEGER:
      // Wider integers would clip above 255 without a word.
      if (type.bytes != 1 || type.is_signed)
        fail(file.path(),
             fmt::format("{}: images are {}-byte {} integers; strata reads uint8 (0-255) "
                         "or float32 (0-1) images",
                         images, type.bytes, type.is_signed ? "signed" : "unsigned"));
      file.read_u8(images, split.pixels, 0, split.count);
      break;
    case H5T_FLOAT:
      file.read_f32(images, split.real_pixels, 0, split.count);
      check_finite_pixels(file.path(), images, split.real_pixels, split.sample_size());
      break;
    default:
      fail(file.path(), images + ": element type is neither an integer type nor a float type");
  }
  split.labels = read_labels(file, labels, 0, split.count);
  check_labels(file.path(), labels, split.labels, num_classes);
  return split;
}

// ---- writing ----

void check_split(const std::string& path, const std::string& split_name, const LabeledImages& split,
                 int num_classes) {
  auto invalid = [&](const std::string& problem) {
    throw std::invalid_argument(
        fmt::format("cannot write {}: {} split: {}", path, split_name, problem));
  };
  if (split.count < 0 || split.channels < 1 || split.height < 1 || split.width < 1) {
    invalid(fmt::format("bad shape {}x{}x{}x{}", split.count, split.channels, split.height,
                        split.width));
  }
  const std::size_t pixels = split.real() ? split.real_pixels.size() : split.pixels.size();
  if (static_cast<std::int64_t>(pixels) != split.count * split.sample_size()) {
    invalid(
        fmt::format("{} pixels for {} samples of {}", pixels, split.count, split.sample_size()));
  }
  if (static_cast<std::int64_t>(split.labels.size()) != split.count) {
    invalid(fmt::format("{} labels for {} samples", split.labels.size(), split.count));
  }
  // A file that read_dataset would reject is a bug at the writer, so refuse to produce one.
  for (std::size_t i = 0; i < split.labels.size(); ++i) {
    if (split.labels[i] >= num_classes) {
      invalid(fmt::format("label {} at index {} is not below num_classes {}", split.labels[i], i,
                          num_classes));
    }
  }
}

void write_split(h5::File& file, const std::string& split_name, const LabeledImages& split) {
  // Single-channel images are stored [N,H,W], the form other tools (and h5py users) expect for
  // MNIST-likes.
  std::vector<std::int64_t> image_shape{split.count, split.channels, split.height, split.width};
  if (split.channels == 1) image_shape.erase(image_shape.begin() + 1);
  if (split.real())
    file.write_f32(default_names.images_of(split_name), image_shape, split.real_pixels.data());
  else
    file.write_u8(default_names.images_of(split_name), image_shape, split.pixels.data());
  file.write_u8(default_names.labels_of(split_name), {split.count}, split.labels.data());
}

// ---- synthetic ----

// Stream coordinates under the run seed; the tag keeps them apart from other users of derive_seed.
constexpr std::uint64_t kSyntheticTag = 0x73796e7468657469ULL;  // ASCII "syntheti"
constexpr std::uint64_t kPrototypeStream = 0;
constexpr std::uint64_t kTrainStream = 1;
constexpr std::uint64_t kTestStream = 2;
// Noise of about 40/255 keeps samples visibly noisy while prototypes, whose pixels are independent
// uniform draws, stay far apart (mean |difference| ~85 per pixel), so a small MLP separates them
// easily.
constexpr float kNoiseStd = 40.0f;

void check_spec(const SyntheticSpec& spec) {
  auto positive = [](int v) { return v > 0; };
  if (!positive(spec.train) || !positive(spec.test) || !positive(spec.channels) ||
      !positive(spec.height) || !positive(spec.width) || spec.classes < kMinClasses ||
      spec.classes > kMaxClasses) {
    throw ConfigError(fmt::format(
        "data.synthetic: need train, test, channels, height, width > 0 and classes in [{}, {}] "
        "(got train {}, test {}, classes {}, channels {}, height {}, width {})",
        kMinClasses, kMaxClasses, spec.train, spec.test, spec.classes, spec.channels, spec.height,
        spec.width));
  }
}

std::vector<std::uint8_t> make_prototypes(const SyntheticSpec& spec, std::int64_t sample_size,
                                          std::uint64_t seed) {
  Rng rng(derive_seed(seed, {kSyntheticTag, kPrototypeStream}));
  std::vector<std::uint8_t> prototypes(static_cast<std::size_t>(spec.classes * sample_size));
  for (auto& p : prototypes) p = static_cast<std::uint8_t>(rng.below(256));
  return prototypes;
}

LabeledImages draw_split(const SyntheticSpec& spec, int count,
                         const std::vector<std::uint8_t>& prototypes, Rng rng) {
  LabeledImages split;
  split.count = count;
  split.channels = spec.channels;
  split.height = spec.height;
  split.width = spec.width;
  const std::int64_t size = split.sample_size();
  split.pixels.resize(static_cast<std::size_t>(count * size));
  split.labels.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto label =
        static_cast<std::uint8_t>(rng.below(static_cast<std::uint64_t>(spec.classes)));
    split.labels[i] = label;
    const std::uint8_t* prototype = prototypes.data() + label * size;
    std::uint8_t* sample = split.pixels.data() + i * size;
    for (std::int64_t j = 0; j < size; ++j) {
      const float value = std::round(static_cast<float>(prototype[j]) + kNoiseStd * rng.normal());
      sample[j] = static_cast<std::uint8_t>(std::clamp(value, 0.0f, 255.0f));
    }
  }
  return split;
}

}  // namespace

std::vector<std::uint8_t> read_split_labels(const std::string& path, const std::string& split,
                                            const DatasetNames& names) {
  const h5::File file = h5::File::open_read(path);
  return read_labels(file, names.labels_of(split), 0, -1);
}

void check_finite_pixels(const std::string& path, const std::string& dataset,
                         const std::vector<float>& pixels, std::int64_t sample_size) {
  const auto bad =
      std::find_if(pixels.begin(), pixels.end(), [](float v) { return !std::isfinite(v); });
  if (bad == pixels.end()) return;
  const auto at = bad - pixels.begin();
  fail(path, fmt::format("{}: pixel {} of a sample is {}; images must hold finite values", dataset,
                         at % sample_size, *bad));
}

Dataset read_dataset(const std::string& path, std::int64_t train_limit, std::int64_t test_limit,
                     const DatasetNames& names) {
  const h5::File file = h5::File::open_read(path);
  Dataset dataset;
  const std::int64_t num_classes = read_num_classes(file, names);
  dataset.num_classes = static_cast<int>(num_classes);
  // Provenance is informational; files from other tools may lack it.
  if (file.has_attr("/", "source")) dataset.source = file.read_attr_string("/", "source");

  dataset.train = read_split(file, "train", train_limit, num_classes, names);
  dataset.test = read_split(file, "test", test_limit, num_classes, names);
  const LabeledImages& a = dataset.train;
  const LabeledImages& b = dataset.test;
  if (a.channels != b.channels || a.height != b.height || a.width != b.width) {
    fail(path, fmt::format("{} samples are {}x{}x{} (CxHxW) but {} samples are {}x{}x{}",
                           names.images_of("test"), b.channels, b.height, b.width,
                           names.images_of("train"), a.channels, a.height, a.width));
  }
  if (a.real() != b.real())
    fail(path, fmt::format("{} and {} have different element types (one uint8, one float)",
                           names.images_of("train"), names.images_of("test")));
  return dataset;
}

void write_dataset(const std::string& path, const Dataset& dataset) {
  if (dataset.num_classes < kMinClasses || dataset.num_classes > kMaxClasses) {
    throw std::invalid_argument(fmt::format("cannot write {}: num_classes {} is not in [{}, {}]",
                                            path, dataset.num_classes, kMinClasses, kMaxClasses));
  }
  check_split(path, "train", dataset.train, dataset.num_classes);
  check_split(path, "test", dataset.test, dataset.num_classes);

  h5::File file = h5::File::create(path);
  write_split(file, "train", dataset.train);
  write_split(file, "test", dataset.test);
  file.write_attr_int("/", "num_classes", dataset.num_classes);
  file.write_attr_string("/", "source", dataset.source);
  // Errors at close would be lost in the destructor; flushing here reports them.
  file.flush();
}

Dataset make_synthetic(const SyntheticSpec& spec, std::uint64_t seed) {
  check_spec(spec);
  const std::int64_t sample_size = std::int64_t{spec.channels} * spec.height * spec.width;
  const std::vector<std::uint8_t> prototypes = make_prototypes(spec, sample_size, seed);
  Dataset dataset;
  dataset.num_classes = spec.classes;
  dataset.source = "synthetic";
  dataset.train = draw_split(spec, spec.train, prototypes,
                             Rng(derive_seed(seed, {kSyntheticTag, kTrainStream})));
  dataset.test =
      draw_split(spec, spec.test, prototypes, Rng(derive_seed(seed, {kSyntheticTag, kTestStream})));
  return dataset;
}

}  // namespace strata
