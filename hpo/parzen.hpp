// The tree-structured Parzen estimator's densities (Bergstra et al. 2011, as Optuna's TPESampler
// builds them): a mixture of truncated Gaussians over a real interval, one per observation plus a
// wide prior, and a smoothed categorical distribution for choices.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/rng.hpp"

namespace strata {

// How many of n observations are "good": ceil(gamma x n), at most max_good (Optuna's default
// gamma: 0.1 and 25).
std::size_t good_count(std::size_t n, double gamma, std::size_t max_good);

// A mixture of Gaussians truncated to [lo, hi]: one component at each observation and a prior
// centred on the interval with its whole width as sigma. Each component's sigma is the larger gap
// to its neighbours in sorted order (the interval's ends standing beyond the outermost), clipped
// to [(hi - lo) / min(100, 1 + n), hi - lo] (Optuna's magic clip).
class Parzen {
 public:
  Parzen(std::span<const double> observations, double lo, double hi, double prior_weight);

  double log_pdf(double x) const;
  // A draw: a component by weight, then its Gaussian until the draw lies in [lo, hi].
  double sample(Rng& rng) const;

  const std::vector<double>& mus() const { return mus_; }
  const std::vector<double>& sigmas() const { return sigmas_; }
  const std::vector<double>& weights() const { return weights_; }

 private:
  double lo_, hi_;
  std::vector<double> mus_, sigmas_, weights_;  // weights sum to 1
};

// A categorical distribution over k choices: each observation's count plus prior_weight / k,
// normalised.
std::vector<double> categorical_weights(std::span<const std::size_t> observations, std::size_t k,
                                        double prior_weight);

// A draw from the normal distribution in double precision (Box-Muller).
double normal_double(Rng& rng);

// log of the density at x of the Gaussian (mu, sigma) truncated to [lo, hi].
double log_truncated_normal(double x, double mu, double sigma, double lo, double hi);
// A draw from it, by rejection; mu clamped to [lo, hi] if a thousand draws all miss.
double sample_truncated_normal(double mu, double sigma, double lo, double hi, Rng& rng);

}  // namespace strata
