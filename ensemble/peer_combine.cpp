#include "ensemble/peer_combine.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

namespace {

constexpr double fixed_one = 0x1.0p40;

double fixed(double value) {
  return std::nearbyint(value * fixed_one);
}

}  // namespace

EnsembleSums::EnsembleSums(std::int64_t samples, int classes)
    : samples_(samples),
      classes_(classes),
      sums_(static_cast<std::size_t>(3 * samples * classes + 2), 0.0) {}

void EnsembleSums::add(const Predictions& member, double weight) {
  if (member.classes != classes_ || member.samples() != samples_)
    throw std::invalid_argument(
        fmt::format("EnsembleSums: a member with {} samples of {} classes, expected {} of {}",
                    member.samples(), member.classes, samples_, classes_));
  if (!(weight >= 0.0 && weight <= 1.0))
    throw std::invalid_argument(fmt::format("EnsembleSums: weight {} is not in [0, 1]", weight));
  const std::size_t cells = member.probabilities.size();
  double* mean = sums_.data();
  double* weighted = mean + cells;
  double* votes = weighted + cells;
  for (std::size_t i = 0; i < cells; ++i) {
    mean[i] += fixed(member.probabilities[i]);
    weighted[i] += fixed(weight * member.probabilities[i]);
  }
  const auto choice = predicted_classes(member);
  for (std::int64_t s = 0; s < samples_; ++s)
    votes[s * classes_ + choice[static_cast<std::size_t>(s)]] += 1.0;
  sums_[sums_.size() - 2] += fixed(weight);
  sums_.back() += 1.0;
}

void EnsembleSums::sum_over(const Communicator& peers) {
  peers.allreduce_sum(std::span<double>(sums_));
}

CombinedPredictions EnsembleSums::finish() const {
  const double count = sums_.back(), weight = sums_[sums_.size() - 2];
  if (!(count > 0.0) || !(weight > 0.0))
    throw std::invalid_argument(fmt::format("EnsembleSums: {} members with weights summing to {}",
                                            count, weight / fixed_one));
  const auto cells = static_cast<std::size_t>(samples_ * classes_);
  const double* mean = sums_.data();
  const double* weighted = mean + cells;
  const double* votes = weighted + cells;
  CombinedPredictions out;
  out.mean = {classes_, std::vector<float>(cells)};
  out.weighted = {classes_, std::vector<float>(cells)};
  for (std::size_t i = 0; i < cells; ++i) {
    out.mean.probabilities[i] = static_cast<float>(mean[i] / (count * fixed_one));
    out.weighted.probabilities[i] = static_cast<float>(weighted[i] / weight);
  }
  out.vote.resize(static_cast<std::size_t>(samples_));
  for (std::int64_t s = 0; s < samples_; ++s) {
    const double* v = votes + s * classes_;
    const double* p = mean + s * classes_;
    int best = 0;
    for (int c = 1; c < classes_; ++c)
      if (v[c] > v[best] || (v[c] == v[best] && p[c] > p[best])) best = c;
    out.vote[static_cast<std::size_t>(s)] = best;
  }
  return out;
}

}  // namespace strata
