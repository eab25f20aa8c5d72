#include "hpo/parzen.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

namespace {

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}

}  // namespace

std::size_t good_count(std::size_t n, double gamma, std::size_t max_good) {
  return std::min(static_cast<std::size_t>(std::ceil(gamma * static_cast<double>(n))), max_good);
}

Parzen::Parzen(std::span<const double> observations, double lo, double hi, double prior_weight)
    : lo_(lo), hi_(hi) {
  if (!(lo < hi) || !(prior_weight > 0.0))
    throw std::invalid_argument(
        fmt::format("Parzen: interval [{}, {}], prior weight {}", lo, hi, prior_weight));
  const double prior_mu = 0.5 * (lo + hi), width = hi - lo;
  mus_.assign(observations.begin(), observations.end());
  mus_.push_back(prior_mu);
  std::vector<std::size_t> order(mus_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return mus_[a] < mus_[b]; });
  const double smallest = width / std::min(100.0, 1.0 + static_cast<double>(observations.size()));
  sigmas_.assign(mus_.size(), width);
  for (std::size_t r = 0; r < order.size(); ++r) {
    const std::size_t i = order[r];
    if (i == mus_.size() - 1) continue;  // the prior keeps the whole width
    const double left = r == 0 ? lo : mus_[order[r - 1]];
    const double right = r + 1 == order.size() ? hi : mus_[order[r + 1]];
    sigmas_[i] = std::clamp(std::max(mus_[i] - left, right - mus_[i]), smallest, width);
  }
  weights_.assign(mus_.size(), 1.0);
  weights_.back() = prior_weight;
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w /= total;
}

double Parzen::log_pdf(double x) const {
  // log-sum-exp over the components.
  std::vector<double> terms(mus_.size());
  for (std::size_t i = 0; i < mus_.size(); ++i)
    terms[i] = std::log(weights_[i]) + log_truncated_normal(x, mus_[i], sigmas_[i], lo_, hi_);
  const double top = *std::max_element(terms.begin(), terms.end());
  double sum = 0.0;
  for (const double t : terms) sum += std::exp(t - top);
  return top + std::log(sum);
}

double Parzen::sample(Rng& rng) const {
  double u = rng.uniform_double();
  std::size_t i = 0;
  while (i + 1 < weights_.size() && u >= weights_[i]) u -= weights_[i++];
  return sample_truncated_normal(mus_[i], sigmas_[i], lo_, hi_, rng);
}

double log_truncated_normal(double x, double mu, double sigma, double lo, double hi) {
  const double z = (x - mu) / sigma;
  const double mass = normal_cdf((hi - mu) / sigma) - normal_cdf((lo - mu) / sigma);
  return -0.5 * z * z - std::log(sigma * std::sqrt(2.0 * std::numbers::pi)) -
         std::log(std::max(mass, 1e-300));
}

double sample_truncated_normal(double mu, double sigma, double lo, double hi, Rng& rng) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const double x = mu + sigma * normal_double(rng);
    if (x >= lo && x <= hi) return x;
  }
  // Only a component far outside the interval gets here: its nearest end.
  return std::clamp(mu, lo, hi);
}

std::vector<double> categorical_weights(std::span<const std::size_t> observations, std::size_t k,
                                        double prior_weight) {
  std::vector<double> w(k, prior_weight / static_cast<double>(k));
  for (const std::size_t c : observations)
    if (c < k) w[c] += 1.0;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= total;
  return w;
}

double normal_double(Rng& rng) {
  const double u1 = 1.0 - rng.uniform_double();
  const double u2 = rng.uniform_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace strata
