// Samples ready for training: normalised float images, the validation hold-out, and batch
// gathering.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dataset.hpp"
#include "core/tensor.hpp"

namespace strata {

struct SampleSet {
  Tensor images;                     // [N, C, H, W], normalised
  std::vector<std::int32_t> labels;  // N
  std::int64_t count() const { return static_cast<std::int64_t>(labels.size()); }
};

struct TrainingData {
  SampleSet train, validation, test;
  Shape sample_shape;  // [C, H, W]
  int num_classes = 0;
  float mean = 0.0f;    // of the training pixels, in [0,1] units
  float stddev = 1.0f;  // likewise
};

// Scales pixels to [0,1] and standardises them with the training split's mean and deviation,
// after holding out `validation_fraction` of /train, chosen by a shuffle seeded with `split_seed`.
TrainingData prepare_training_data(const Dataset& dataset, double validation_fraction,
                                   std::uint64_t split_seed);

// Reads the dataset the config names (HDF5 file or synthetic) and prepares it with the run's split
// seed. Throws DataError for a missing or damaged file.
TrainingData load_training_data(const Config& config);

// A permutation of [0, n) drawn from `seed`.
std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed);

// Copies the samples at `indices` into a batch tensor [indices.size(), C, H, W] and their labels.
void gather_batch(const SampleSet& set, std::span<const std::int64_t> indices, Tensor& images,
                  std::vector<std::int32_t>& labels);

}  // namespace strata
