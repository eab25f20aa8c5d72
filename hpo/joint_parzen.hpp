// Multivariate TPE's densities (Falkner et al. 2018; Optuna's TPESampler(multivariate=True)): a
// mixture with one component per observation, each the product over the dimensions of that
// observation's univariate kernels, plus a wide prior. Unlike a product of univariate Parzen
// estimators it keeps which values occurred together (a learning rate with its batch size).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/rng.hpp"

namespace strata {

// One dimension: a real interval [lo, hi] in the search scale (an integer's is [lo - 0.5,
// hi + 0.5]), or, with categories > 0, a choice among that many indices.
struct JointDim {
  double lo = 0.0, hi = 1.0;
  std::size_t categories = 0;
};

class JointParzen {
 public:
  // `observations`: one row per observation, a value per dimension (an index for a choice). A
  // real dimension's kernel at an observation is the truncated Gaussian that Parzen gives it (its
  // sigma from the gaps to its neighbours in that dimension); a choice's keeps the observed index
  // with weight 1 and spreads prior_weight evenly over all indices. The prior component is
  // Parzen's prior in each real dimension and uniform over each choice, with weight prior_weight
  // against 1 per observation.
  JointParzen(std::vector<JointDim> dims, const std::vector<std::vector<double>>& observations,
              double prior_weight);

  double log_pdf(std::span<const double> x) const;
  // A draw: a component by weight, then each dimension from that component's kernel.
  std::vector<double> sample(Rng& rng) const;

 private:
  // log of component i's kernel in dimension d at x.
  double log_kernel(std::size_t d, std::size_t i, double x) const;

  std::vector<JointDim> dims_;
  double prior_weight_;
  std::vector<double> weights_;                    // per component, the prior last; sum to 1
  std::vector<std::vector<double>> mus_, sigmas_;  // [dimension][component]
};

}  // namespace strata
