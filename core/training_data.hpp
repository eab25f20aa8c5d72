// Samples ready for training: normalised float images, the validation hold-out, and batch
// gathering.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dataset.hpp"
#include "core/hdf5_file.hpp"
#include "core/tensor.hpp"

namespace strata {

// Reads training samples from the HDF5 file row by row as each step needs them (hyperslab reads),
// so that a data-parallel rank reads only its shard of every global batch. Not thread-safe: the
// trainer reads on its main thread.
class ShardReader {
 public:
  // `file_rows`: the /train rows this set is made of, ascending; position i is file row
  // file_rows[i].
  ShardReader(const std::string& path, const DatasetNames& names,
              std::vector<std::int64_t> file_rows, Shape sample_shape, float mean, float stddev);
  std::int64_t count() const { return static_cast<std::int64_t>(file_rows_.size()); }
  void read(std::span<const std::int64_t> positions, Tensor& images,
            std::vector<std::int32_t>& labels) const;
  // Rows read from the file so far, for tests and progress.
  std::int64_t rows_read() const { return rows_read_; }

 private:
  h5::File file_;
  std::string images_, labels_;  // the train split's datasets
  bool real_;                    // float32 images
  std::vector<std::int64_t> file_rows_;
  Shape sample_shape_;
  float mean_, stddev_;
  mutable std::vector<std::int64_t> wanted_;  // scratch: sorted file rows of one read
  mutable std::vector<std::size_t> order_;
  mutable std::vector<std::uint8_t> pixels_, label_bytes_;
  mutable std::vector<float> real_pixels_;
  mutable std::int64_t rows_read_ = 0;
};

// Samples in memory, or (train split with data.read: shards) behind a ShardReader.
struct SampleSet {
  Tensor images;                     // [N, C, H, W], normalised; empty when read from the file
  std::vector<std::int32_t> labels;  // N; empty when read from the file
  std::shared_ptr<const ShardReader> reader;
  std::int64_t count() const {
    return reader ? reader->count() : static_cast<std::int64_t>(labels.size());
  }
};

// The input standardisation a model was trained with: pixel / 255 minus mean, over stddev.
struct Normalisation {
  float mean = 0.0f;
  float stddev = 1.0f;
};

struct TrainingData {
  SampleSet train, validation, test;
  Shape sample_shape;  // [C, H, W]
  int num_classes = 0;
  float mean = 0.0f;    // of the training pixels, in [0,1] units (or as given)
  float stddev = 1.0f;  // likewise
  Normalisation normalisation() const { return {mean, stddev}; }
};

// Scales pixels to [0,1] and standardises them with the training split's mean and deviation,
// after holding out `validation_fraction` of /train, chosen by a shuffle seeded with `split_seed`.
// `given`: standardise with these values instead (a pretrained model's).
TrainingData prepare_training_data(const Dataset& dataset, double validation_fraction,
                                   std::uint64_t split_seed, const Normalisation* given = nullptr);

// Reads the dataset the config names (HDF5 file or synthetic) and prepares it with the run's split
// seed, standardised with `given` when set (the values a weights file was trained with), else
// with the training split's own; then keeps data.classes (relabelled 0..k-1 in their listed order)
// and data.samples_per_class training samples of each. Throws DataError for a missing or damaged
// file.
TrainingData load_training_data(const Config& config, const Normalisation* given = nullptr);

// Keeps the samples whose label is in `classes`, relabelled to its position there, in every set;
// then, when samples_per_class > 0, the first that many training samples of each class in an
// order shuffled by `seed`. Throws DataError naming a class with fewer training samples.
void select_classes(TrainingData& data, const std::vector<int>& classes, int samples_per_class,
                    std::uint64_t seed);

// A permutation of [0, n) drawn from `seed`.
std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed);

// Copies the samples at `indices` into a batch tensor [indices.size(), C, H, W] and their labels,
// from memory or, for a set with a reader, from the file.
void gather_batch(const SampleSet& set, std::span<const std::int64_t> indices, Tensor& images,
                  std::vector<std::int32_t>& labels);
// gather_batch in parts, for threads that each copy some of the rows of one batch from memory
// (a set without a reader): size_batch sizes the tensor and the labels for `count` samples, then
// gather_rows copies the samples at `indices` into rows [first_row, first_row + indices.size()).
void size_batch(const SampleSet& set, std::int64_t count, Tensor& images,
                std::vector<std::int32_t>& labels);
void gather_rows(const SampleSet& set, std::span<const std::int64_t> indices,
                 std::int64_t first_row, Tensor& images, std::vector<std::int32_t>& labels);

}  // namespace strata
