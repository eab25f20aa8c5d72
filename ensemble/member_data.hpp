// What distinguishes an ensemble member's data: a bootstrap sample of the training set (bagging),
// or the part of every image it may see (feature subsets).
#pragma once

#include <cstdint>

#include "core/config.hpp"
#include "core/training_data.hpp"

namespace strata {

// `data` with its training set replaced by count() draws with replacement from it, chosen by
// `seed`; validation and test sets are unchanged. Needs the training set in memory (data.read:
// memory); throws ConfigError otherwise.
TrainingData bootstrap_sample(const TrainingData& data, std::uint64_t seed);

// Sets every pixel outside `subset` to 0 (the training mean, after normalisation) in all three
// sets, in memory. Throws ConfigError (at the subset's line) when the subset lies outside the
// images or the training set is read from the file.
void mask_features(TrainingData& data, const FeatureSubset& subset, const std::string& config_file);

// "rows 0-14, cols all, channels all": how reports name a subset.
std::string describe(const FeatureSubset& subset);

}  // namespace strata
