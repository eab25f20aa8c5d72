// Labeled image datasets: the HDF5 layout reader and the seeded synthetic generator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"

namespace strata {

// One split of a dataset: N images of C x H x W pixels and their labels. Pixels are uint8 (0-255)
// or, from a float32 file, reals in the units of uint8 / 255 (so 0-1 for the same images).
struct LabeledImages {
  std::int64_t count = 0;
  int channels = 1;
  int height = 0;
  int width = 0;
  std::vector<std::uint8_t> pixels;  // count * channels * height * width, sample-major (uint8)
  std::vector<float> real_pixels;    // the same, when the file's images are float32
  std::vector<std::uint8_t> labels;  // count
  std::int64_t sample_size() const { return std::int64_t{channels} * height * width; }
  bool real() const { return !real_pixels.empty(); }
};

struct Dataset {
  LabeledImages train;
  LabeledImages test;
  int num_classes = 0;
  std::string source;  // provenance, from the file's `source` attribute
};

// Reads the strata HDF5 layout (docs/architecture.md, "HDF5 layouts"):
//   /train/images uint8 or float32 [N,H,W] or [N,C,H,W], /train/labels integers [N], the same
//   under /test (other names with `names`), root attributes num_classes (integer; when absent,
//   the largest label + 1) and source (string, optional).
// `train_limit` / `test_limit` > 0 read only the first that many samples (hyperslab).
// Throws DataError naming the file and what is missing or inconsistent.
Dataset read_dataset(const std::string& path, std::int64_t train_limit = 0,
                     std::int64_t test_limit = 0, const DatasetNames& names = {});

// Every label of `split` ("train", "test"), checked to be class numbers below 256 whatever their
// integer type. Throws DataError naming the file, the dataset and the first bad label.
std::vector<std::uint8_t> read_split_labels(const std::string& path, const std::string& split,
                                            const DatasetNames& names = {});

// Throws DataError naming the dataset, sample and pixel of the first value in `pixels` (a batch of
// float32 images, `sample_size` values each) that is not finite.
void check_finite_pixels(const std::string& path, const std::string& dataset,
                         const std::vector<float>& pixels, std::int64_t sample_size);

// Writes a dataset in that layout (used by the importer and by tests).
void write_dataset(const std::string& path, const Dataset& dataset);

// A seeded, learnable synthetic dataset: each class is a fixed random prototype image plus noise.
Dataset make_synthetic(const SyntheticSpec& spec, std::uint64_t seed);

// Converts the gzipped IDX files of Fashion-MNIST/MNIST in `dir`
// (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
// t10k-labels-idx1-ubyte.gz) into `out_path` in the layout above. Throws DataError.
void import_idx(const std::string& dir, const std::string& out_path);

}  // namespace strata
