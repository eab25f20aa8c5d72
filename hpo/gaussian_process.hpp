// Gaussian-process regression for Bayesian optimisation: a Matern-5/2 kernel with one length
// scale per input, its hyperparameters fitted to the data (maximum a posteriori), the posterior
// mean and variance, and the log of expected improvement.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace strata {

// The kernel's hyperparameters, in log space: k(x, x') = signal x matern52(r), r the distance with
// each input divided by its length scale, plus noise on the diagonal.
struct GpHyper {
  std::vector<double> log_lengthscales;
  double log_signal = 0.0;  // log of the signal variance
  double log_noise = -4.0;  // log of the noise variance
};

// The priors that keep a fit on a few points from over-fitting (those of BoTorch's current
// default model): length scales log-normal around `log_lengthscale_centre` with sigma sqrt(3);
// noise log-normal around -4 with sigma 1; signal log-normal around 0 with sigma 1, for outputs
// standardised to mean 0 and variance 1.
double log_prior(const GpHyper& h, double log_lengthscale_centre);

// BoTorch's centre of the log length scales, sqrt(2) + log(inputs) / 2: it grows with the inputs,
// so that a model of many inputs starts out smooth.
double dimension_scaled_lengthscale_centre(std::size_t inputs);

// A Cholesky factorisation of a symmetric positive-definite matrix (n x n, row-major), lower
// triangle; false if it is not positive definite.
bool cholesky(std::vector<double>& a, std::size_t n);

class GaussianProcess {
 public:
  // `inputs`: one row per observation, all of one length; `outputs`: one value each. Throws
  // std::invalid_argument on mismatched sizes or no observation; adds jitter to the diagonal until
  // the kernel matrix factorises.
  GaussianProcess(std::vector<std::vector<double>> inputs, std::vector<double> outputs,
                  GpHyper hyper);

  // The hyperparameters that maximise log marginal likelihood + log_prior, by gradient ascent in
  // log space from the priors' centres; the length scales' centre is
  // dimension_scaled_lengthscale_centre unless given.
  static GpHyper fit(const std::vector<std::vector<double>>& inputs,
                     const std::vector<double>& outputs, int iterations = 200,
                     std::optional<double> log_lengthscale_centre = std::nullopt);

  double mean(std::span<const double> x) const;
  // The posterior variance of the latent function (noise excluded), at least 1e-12.
  double variance(std::span<const double> x) const;
  // log p(outputs | inputs, hyper) and its gradient in the order of GpHyper's fields
  // (length scales, signal, noise).
  double log_marginal_likelihood(std::vector<double>* gradient = nullptr) const;
  const GpHyper& hyper() const { return hyper_; }

 private:
  double kernel(std::span<const double> a, std::span<const double> b) const;
  std::vector<double> cross(std::span<const double> x) const;  // k(x, each input)

  std::vector<std::vector<double>> inputs_;
  std::vector<double> outputs_;
  GpHyper hyper_;
  std::vector<double> chol_;            // lower Cholesky factor of K + noise I (+ jitter)
  std::vector<double> alpha_;           // (K + noise I)^-1 outputs
  std::vector<double> inverse_scales_;  // 1 / each length scale
  double signal_ = 1.0;                 // the signal variance
  double jitter_ = 0.0;
};

// log E[max(f - best, 0)] for f ~ N(mean, variance), finite even where the improvement is
// vanishingly unlikely (so that candidates far from the best still rank).
double log_expected_improvement(double mean, double variance, double best);

}  // namespace strata
