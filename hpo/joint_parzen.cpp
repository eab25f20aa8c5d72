#include "hpo/joint_parzen.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "hpo/parzen.hpp"

namespace strata {

JointParzen::JointParzen(std::vector<JointDim> dims,
                         const std::vector<std::vector<double>>& observations, double prior_weight)
    : dims_(std::move(dims)), prior_weight_(prior_weight) {
  if (!(prior_weight > 0.0))
    throw std::invalid_argument(fmt::format("JointParzen: prior weight {}", prior_weight));
  const std::size_t n = observations.size();
  for (const auto& row : observations)
    if (row.size() != dims_.size())
      throw std::invalid_argument(
          fmt::format("JointParzen: an observation of {} values for {} "
                      "dimensions",
                      row.size(), dims_.size()));
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    std::vector<double> column;
    column.reserve(observations.size() + 1);
    for (const auto& row : observations) column.push_back(row[d]);
    if (dims_[d].categories > 0) {
      column.push_back(-1.0);  // the prior: no observed index
      mus_.push_back(std::move(column));
      sigmas_.emplace_back(n + 1, 0.0);
    } else {
      const Parzen univariate(column, dims_[d].lo, dims_[d].hi, prior_weight);
      mus_.push_back(univariate.mus());
      sigmas_.push_back(univariate.sigmas());
    }
  }
  weights_.assign(n + 1, 1.0 / (static_cast<double>(n) + prior_weight));
  weights_.back() = prior_weight / (static_cast<double>(n) + prior_weight);
}

double JointParzen::log_kernel(std::size_t d, std::size_t i, double x) const {
  const JointDim& dim = dims_[d];
  if (dim.categories == 0)
    return log_truncated_normal(x, mus_[d][i], sigmas_[d][i], dim.lo, dim.hi);
  const auto k = static_cast<double>(dim.categories);
  if (mus_[d][i] < 0.0) return -std::log(k);
  const double hit = std::llround(x) == std::llround(mus_[d][i]) ? 1.0 : 0.0;
  return std::log((hit + prior_weight_ / k) / (1.0 + prior_weight_));
}

double JointParzen::log_pdf(std::span<const double> x) const {
  if (x.size() != dims_.size())
    throw std::invalid_argument(
        fmt::format("JointParzen: a point of {} values for {} dimensions", x.size(), dims_.size()));
  // log-sum-exp over the components of each one's weight times its kernels' product.
  std::vector<double> terms(weights_.size());
  for (std::size_t i = 0; i < weights_.size(); ++i) {
    terms[i] = std::log(weights_[i]);
    for (std::size_t d = 0; d < dims_.size(); ++d) terms[i] += log_kernel(d, i, x[d]);
  }
  const double top = *std::max_element(terms.begin(), terms.end());
  double sum = 0.0;
  for (const double t : terms) sum += std::exp(t - top);
  return top + std::log(sum);
}

std::vector<double> JointParzen::sample(Rng& rng) const {
  double u = rng.uniform_double();
  std::size_t i = 0;
  while (i + 1 < weights_.size() && u >= weights_[i]) u -= weights_[i++];
  std::vector<double> x;
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    const JointDim& dim = dims_[d];
    if (dim.categories == 0) {
      x.push_back(sample_truncated_normal(mus_[d][i], sigmas_[d][i], dim.lo, dim.hi, rng));
      continue;
    }
    // The observed index with weight 1, and prior_weight spread evenly over all of them.
    const auto k = dim.categories;
    const bool prior = mus_[d][i] < 0.0;
    const double spread = prior ? 1.0 : prior_weight_ / (1.0 + prior_weight_);
    auto c = static_cast<std::size_t>(rng.uniform_double() * static_cast<double>(k));
    if (!prior && rng.uniform_double() >= spread)
      c = static_cast<std::size_t>(std::llround(mus_[d][i]));
    x.push_back(static_cast<double>(std::min(c, k - 1)));
  }
  return x;
}

}  // namespace strata
