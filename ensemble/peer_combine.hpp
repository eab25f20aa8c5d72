// Combining an ensemble's predictions over the peers communicator: each member group adds the
// members it holds, one allreduce sums the groups, and no rank ever gathers every member's
// predictions.
#pragma once

#include <cstdint>
#include <vector>

#include "ensemble/combiners.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// What every combiner gives for one set of samples.
struct CombinedPredictions {
  Predictions mean;       // the mean of the members' probabilities
  Predictions weighted;   // their mean with each member's weight
  std::vector<int> vote;  // combine_vote's rule, ties on the summed probabilities
};

// The sums the combiners need, over some of an ensemble's members. Every value is added in fixed
// point (multiples of 2^-40, integers in doubles below 2^53, so sums are exact): the result is the
// same to the bit however the members are spread over groups and in whatever order MPI sums.
class EnsembleSums {
 public:
  EnsembleSums(std::int64_t samples, int classes);
  // One member's predictions with its share in the weighted mean (in [0, 1]). Throws
  // std::invalid_argument for predictions of another shape or a weight outside [0, 1].
  void add(const Predictions& member, double weight);
  // Sums every peer's additions into every peer's. Collective over `peers`.
  void sum_over(const Communicator& peers);
  // The combined predictions of every member added (here or, after sum_over, on any peer).
  // Throws std::invalid_argument when no member with a positive weight was added.
  CombinedPredictions finish() const;
  int members() const { return static_cast<int>(sums_.back()); }

 private:
  std::int64_t samples_;
  int classes_;
  // [mean sums | weighted sums | votes] of samples x classes each, then the weights' sum and the
  // member count.
  std::vector<double> sums_;
};

}  // namespace strata
