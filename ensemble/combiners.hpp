// How the predictions of an ensemble's members become one: the mean of their class probabilities,
// a weighted mean, or a vote.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

// One member's predictions: class probabilities (softmax), `samples` rows of `classes` values.
struct Predictions {
  int classes = 0;
  std::vector<float> probabilities;
  std::int64_t samples() const {
    return classes > 0 ? static_cast<std::int64_t>(probabilities.size()) / classes : 0;
  }
};

// The weighted mean of the members' probabilities, weights normalised to sum 1 (equal weights:
// the plain mean). Summed in double, so that the mean of identical members is that member,
// exactly. Throws std::invalid_argument for members of other shapes or weights that are negative,
// non-finite or all zero.
Predictions combine_mean(std::span<const Predictions> members,
                         std::span<const double> weights = {});

// Each member votes for its most probable class. A sample goes to the class with the most votes;
// among classes with equally many, to the one with the highest summed probability; then to the
// lowest class index.
std::vector<int> combine_vote(std::span<const Predictions> members);

// The most probable class of each sample (the lowest index among equals).
std::vector<int> predicted_classes(const Predictions& predictions);

// Weights in proportion to each member's validation accuracy, summing to 1.
std::vector<double> accuracy_weights(std::span<const double> validation_accuracies);

// The fraction of samples whose class equals the label.
double accuracy(std::span<const int> classes, std::span<const std::int32_t> labels);

}  // namespace strata
