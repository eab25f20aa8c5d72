#include "ensemble/combiners.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

namespace {

void check_shapes(std::span<const Predictions> members) {
  if (members.empty()) throw std::invalid_argument("combine: an ensemble needs members");
  for (const auto& m : members)
    if (m.classes != members.front().classes ||
        m.probabilities.size() != members.front().probabilities.size())
      throw std::invalid_argument(fmt::format(
          "combine: members of different shapes ({} values of {} classes against {} of {})",
          m.probabilities.size(), m.classes, members.front().probabilities.size(),
          members.front().classes));
}

}  // namespace

std::vector<double> accuracy_weights(std::span<const double> validation_accuracies) {
  double total = 0.0;
  for (double a : validation_accuracies) total += a;
  if (!(total > 0.0) || !std::isfinite(total))
    throw std::invalid_argument("accuracy_weights: the accuracies sum to no positive number");
  std::vector<double> weights;
  for (double a : validation_accuracies) weights.push_back(a / total);
  return weights;
}

Predictions combine_mean(std::span<const Predictions> members, std::span<const double> weights) {
  check_shapes(members);
  std::vector<double> w(members.size(), 1.0);
  if (!weights.empty()) {
    if (weights.size() != members.size())
      throw std::invalid_argument(
          fmt::format("combine: {} weights for {} members", weights.size(), members.size()));
    w.assign(weights.begin(), weights.end());
  }
  double total = 0.0;
  for (double x : w) {
    if (!(x >= 0.0) || !std::isfinite(x))
      throw std::invalid_argument(
          fmt::format("combine: weight {} is not a non-negative number", x));
    total += x;
  }
  if (!(total > 0.0)) throw std::invalid_argument("combine: the weights are all zero");
  const std::size_t n = members.front().probabilities.size();
  std::vector<double> sum(n, 0.0);
  for (std::size_t m = 0; m < members.size(); ++m)
    for (std::size_t i = 0; i < n; ++i) sum[i] += w[m] * members[m].probabilities[i];
  Predictions out{members.front().classes, std::vector<float>(n)};
  for (std::size_t i = 0; i < n; ++i) out.probabilities[i] = static_cast<float>(sum[i] / total);
  return out;
}

std::vector<int> predicted_classes(const Predictions& p) {
  std::vector<int> classes(static_cast<std::size_t>(p.samples()));
  for (std::int64_t s = 0; s < p.samples(); ++s) {
    const float* row = p.probabilities.data() + s * p.classes;
    int best = 0;
    for (int c = 1; c < p.classes; ++c)
      if (row[c] > row[best]) best = c;
    classes[static_cast<std::size_t>(s)] = best;
  }
  return classes;
}

std::vector<int> combine_vote(std::span<const Predictions> members) {
  check_shapes(members);
  const int classes = members.front().classes;
  const std::int64_t samples = members.front().samples();
  std::vector<int> votes(static_cast<std::size_t>(samples * classes), 0);
  for (const auto& m : members) {
    const auto choice = predicted_classes(m);
    for (std::int64_t s = 0; s < samples; ++s)
      ++votes[static_cast<std::size_t>(s * classes + choice[static_cast<std::size_t>(s)])];
  }
  // The tie-break: the highest summed probability, in double as vote_over_peers sums it.
  std::vector<double> summed(members.front().probabilities.size(), 0.0);
  for (const auto& m : members)
    for (std::size_t i = 0; i < summed.size(); ++i) summed[i] += m.probabilities[i];
  std::vector<int> out(static_cast<std::size_t>(samples));
  for (std::int64_t s = 0; s < samples; ++s) {
    const int* v = votes.data() + s * classes;
    const double* p = summed.data() + s * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (v[c] > v[best] || (v[c] == v[best] && p[c] > p[best])) best = c;
    out[static_cast<std::size_t>(s)] = best;
  }
  return out;
}

double accuracy(std::span<const int> classes, std::span<const std::int32_t> labels) {
  if (classes.size() != labels.size())
    throw std::invalid_argument(
        fmt::format("accuracy: {} predictions for {} labels", classes.size(), labels.size()));
  if (classes.empty()) return 0.0;
  std::size_t right = 0;
  for (std::size_t i = 0; i < classes.size(); ++i) right += classes[i] == labels[i] ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(classes.size());
}

}  // namespace strata
