#include "hpo/gaussian_process.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace strata {

namespace {

const double sqrt5 = std::sqrt(5.0);

const double lengthscale_prior_sigma = std::sqrt(3.0);
const double noise_prior_mean = -4.0, noise_prior_sigma = 1.0;
const double signal_prior_mean = 0.0, signal_prior_sigma = 1.0;

double log_normal_density(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  return -0.5 * z * z - std::log(sigma) - 0.5 * std::log(2.0 * std::numbers::pi);
}

// d log N(x; mu, sigma) / dx
double log_normal_slope(double x, double mu, double sigma) {
  return -(x - mu) / (sigma * sigma);
}

// Solves L y = b in place (L lower triangular, n x n row-major).
void forward_substitute(const std::vector<double>& l, std::size_t n, std::vector<double>& b) {
  for (std::size_t i = 0; i < n; ++i) {
    double s = b[i];
    for (std::size_t k = 0; k < i; ++k) s -= l[i * n + k] * b[k];
    b[i] = s / l[i * n + i];
  }
}

// Solves L^T y = b in place.
void back_substitute(const std::vector<double>& l, std::size_t n, std::vector<double>& b) {
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * b[k];
    b[i] = s / l[i * n + i];
  }
}

// The hyperparameters as one vector (length scales, signal, noise) and back.
std::vector<double> flatten(const GpHyper& h) {
  std::vector<double> v = h.log_lengthscales;
  v.push_back(h.log_signal);
  v.push_back(h.log_noise);
  return v;
}

GpHyper unflatten(const std::vector<double>& v) {
  GpHyper h;
  h.log_lengthscales.assign(v.begin(), v.end() - 2);
  h.log_signal = v[v.size() - 2];
  h.log_noise = v.back();
  return h;
}

// Bounds that keep the kernel matrix well conditioned and the fit away from degenerate ends.
void clamp_hyper(std::vector<double>& v) {
  const std::size_t d = v.size() - 2;
  for (std::size_t j = 0; j < d; ++j) v[j] = std::clamp(v[j], std::log(0.01), std::log(1000.0));
  v[d] = std::clamp(v[d], -6.0, 4.0);
  v[d + 1] = std::clamp(v[d + 1], std::log(1e-6), 0.0);
}

double log_prior_slope(const std::vector<double>& v, std::size_t j, double lengthscale_centre) {
  const std::size_t d = v.size() - 2;
  if (j < d) return log_normal_slope(v[j], lengthscale_centre, lengthscale_prior_sigma);
  if (j == d) return log_normal_slope(v[j], signal_prior_mean, signal_prior_sigma);
  return log_normal_slope(v[j], noise_prior_mean, noise_prior_sigma);
}

}  // namespace

double dimension_scaled_lengthscale_centre(std::size_t inputs) {
  return std::numbers::sqrt2 + 0.5 * std::log(static_cast<double>(inputs));
}

double log_prior(const GpHyper& h, double log_lengthscale_centre) {
  double sum = 0.0;
  for (const double l : h.log_lengthscales)
    sum += log_normal_density(l, log_lengthscale_centre, lengthscale_prior_sigma);
  return sum + log_normal_density(h.log_signal, signal_prior_mean, signal_prior_sigma) +
         log_normal_density(h.log_noise, noise_prior_mean, noise_prior_sigma);
}

bool cholesky(std::vector<double>& a, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (std::size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0.0)) return false;
    const double root = std::sqrt(d);
    a[j * n + j] = root;
    for (std::size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (std::size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / root;
    }
    for (std::size_t k = j + 1; k < n; ++k) a[j * n + k] = 0.0;
  }
  return true;
}

GaussianProcess::GaussianProcess(std::vector<std::vector<double>> inputs,
                                 std::vector<double> outputs, GpHyper hyper)
    : inputs_(std::move(inputs)), outputs_(std::move(outputs)), hyper_(std::move(hyper)) {
  const std::size_t n = inputs_.size();
  if (n == 0 || outputs_.size() != n)
    throw std::invalid_argument("GaussianProcess: " + std::to_string(n) + " inputs and " +
                                std::to_string(outputs_.size()) + " outputs");
  for (const auto& row : inputs_)
    if (row.size() != hyper_.log_lengthscales.size())
      throw std::invalid_argument("GaussianProcess: an input of " + std::to_string(row.size()) +
                                  " values for " + std::to_string(hyper_.log_lengthscales.size()) +
                                  " length scales");
  for (const double l : hyper_.log_lengthscales) inverse_scales_.push_back(std::exp(-l));
  signal_ = std::exp(hyper_.log_signal);
  const double noise = std::exp(hyper_.log_noise);
  for (jitter_ = 0.0;; jitter_ = jitter_ == 0.0 ? 1e-8 : jitter_ * 10.0) {
    chol_.assign(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k <= i; ++k)
        chol_[i * n + k] = chol_[k * n + i] = kernel(inputs_[i], inputs_[k]);
    for (std::size_t i = 0; i < n; ++i) chol_[i * n + i] += noise + jitter_;
    if (cholesky(chol_, n)) break;
    if (jitter_ > 1.0) throw std::runtime_error("GaussianProcess: the kernel matrix is singular");
  }
  alpha_ = outputs_;
  forward_substitute(chol_, n, alpha_);
  back_substitute(chol_, n, alpha_);
}

double GaussianProcess::kernel(std::span<const double> a, std::span<const double> b) const {
  double r2 = 0.0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const double d = (a[j] - b[j]) * inverse_scales_[j];
    r2 += d * d;
  }
  const double r = std::sqrt(r2);
  return signal_ * (1.0 + sqrt5 * r + 5.0 / 3.0 * r2) * std::exp(-sqrt5 * r);
}

std::vector<double> GaussianProcess::cross(std::span<const double> x) const {
  std::vector<double> k;
  k.reserve(inputs_.size());
  for (const auto& row : inputs_) k.push_back(kernel(x, row));
  return k;
}

double GaussianProcess::mean(std::span<const double> x) const {
  const std::vector<double> k = cross(x);
  double m = 0.0;
  for (std::size_t i = 0; i < k.size(); ++i) m += k[i] * alpha_[i];
  return m;
}

double GaussianProcess::variance(std::span<const double> x) const {
  std::vector<double> v = cross(x);
  forward_substitute(chol_, inputs_.size(), v);
  double explained = 0.0;
  for (const double e : v) explained += e * e;
  return std::max(signal_ - explained, 1e-12);
}

double GaussianProcess::log_marginal_likelihood(std::vector<double>* gradient) const {
  const std::size_t n = inputs_.size(), d = hyper_.log_lengthscales.size();
  double fit = 0.0, log_det = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    fit += outputs_[i] * alpha_[i];
    log_det += 2.0 * std::log(chol_[i * n + i]);
  }
  const double value =
      -0.5 * fit - 0.5 * log_det - 0.5 * static_cast<double>(n) * std::log(2.0 * std::numbers::pi);
  if (!gradient) return value;

  // W = alpha alpha^T - K^-1 (K^-1 = L^-T L^-1); d value / d theta = tr(W dK/dtheta) / 2. Both
  // are symmetric: the pairs i > k count twice.
  std::vector<double> inverse_t(n * n, 0.0);  // L^-T, rows contiguous: [c][i] = (L^-1)_ic
  for (std::size_t c = 0; c < n; ++c) {
    double* column = &inverse_t[c * n];
    column[c] = 1.0 / chol_[c * n + c];
    for (std::size_t i = c + 1; i < n; ++i) {
      double s = 0.0;
      for (std::size_t k = c; k < i; ++k) s -= chol_[i * n + k] * column[k];
      column[i] = s / chol_[i * n + i];
    }
  }
  gradient->assign(d + 2, 0.0);
  const double signal = signal_;
  std::vector<double> inverse_scale2(d);
  for (std::size_t j = 0; j < d; ++j) inverse_scale2[j] = inverse_scales_[j] * inverse_scales_[j];
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k <= i; ++k) {
      double inverse_ik = 0.0;  // (L^-T L^-1)_ik = sum over m >= i of L^-1_mi L^-1_mk
      for (std::size_t m = i; m < n; ++m) inverse_ik += inverse_t[i * n + m] * inverse_t[k * n + m];
      const double wik = (i == k ? 0.5 : 1.0) * (alpha_[i] * alpha_[k] - inverse_ik);
      if (i == k) {
        (*gradient)[d] += wik * signal;
        (*gradient)[d + 1] += wik * std::exp(hyper_.log_noise);
        continue;
      }
      double r2 = 0.0;
      for (std::size_t j = 0; j < d; ++j) {
        const double diff = inputs_[i][j] - inputs_[k][j];
        r2 += diff * diff * inverse_scale2[j];
      }
      const double r = std::sqrt(r2);
      const double decay = std::exp(-sqrt5 * r);
      (*gradient)[d] += wik * signal * (1.0 + sqrt5 * r + 5.0 / 3.0 * r2) * decay;
      const double radial = wik * 5.0 / 3.0 * signal * (1.0 + sqrt5 * r) * decay;
      for (std::size_t j = 0; j < d; ++j) {
        const double diff = inputs_[i][j] - inputs_[k][j];
        (*gradient)[j] += radial * diff * diff * inverse_scale2[j];
      }
    }
  }
  return value;
}

GpHyper GaussianProcess::fit(const std::vector<std::vector<double>>& inputs,
                             const std::vector<double>& outputs, int iterations,
                             std::optional<double> log_lengthscale_centre) {
  const std::size_t d = inputs.empty() ? 0 : inputs.front().size();
  const double centre = log_lengthscale_centre.value_or(dimension_scaled_lengthscale_centre(d));
  GpHyper start;
  start.log_lengthscales.assign(d, centre);
  start.log_signal = signal_prior_mean;
  start.log_noise = noise_prior_mean;
  // Adam on the log posterior: scale-free steps suit parameters whose gradients differ by orders
  // of magnitude.
  std::vector<double> theta = flatten(start), first(theta.size(), 0.0), second(theta.size(), 0.0);
  std::vector<double> best = theta;
  double best_value = -INFINITY;
  const double rate = 0.1, beta1 = 0.9, beta2 = 0.999;
  for (int t = 1; t <= iterations; ++t) {
    std::vector<double> gradient;
    const GaussianProcess gp(inputs, outputs, unflatten(theta));
    const double value = gp.log_marginal_likelihood(&gradient) + log_prior(gp.hyper(), centre);
    if (value > best_value) best_value = value, best = theta;
    for (std::size_t j = 0; j < theta.size(); ++j) {
      const double g = gradient[j] + log_prior_slope(theta, j, centre);
      first[j] = beta1 * first[j] + (1.0 - beta1) * g;
      second[j] = beta2 * second[j] + (1.0 - beta2) * g * g;
      const double m = first[j] / (1.0 - std::pow(beta1, t));
      const double v = second[j] / (1.0 - std::pow(beta2, t));
      theta[j] += rate * m / (std::sqrt(v) + 1e-8);
    }
    clamp_hyper(theta);
  }
  return unflatten(best);
}

double log_expected_improvement(double mean, double variance, double best) {
  const double sigma = std::sqrt(variance);
  const double z = (mean - best) / sigma;
  const double log_pdf = -0.5 * z * z - 0.5 * std::log(2.0 * std::numbers::pi);
  double log_h;
  if (z > -6.0) {
    const double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
    log_h = std::log(std::exp(log_pdf) + z * cdf);
  } else {
    // phi(z) + z Phi(z) = phi(z) (1/z^2 - 3/z^4 + 15/z^6 - 105/z^8 ...) for z -> -infinity.
    const double u = 1.0 / (z * z);
    log_h = log_pdf + std::log(u * (1.0 - 3.0 * u + 15.0 * u * u - 105.0 * u * u * u));
  }
  return std::log(sigma) + log_h;
}

}  // namespace strata
