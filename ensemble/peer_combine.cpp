#include "ensemble/peer_combine.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace strata {

Predictions mean_over_peers(const Predictions& mine, double weight, const Communicator& peers) {
  // The weighted probabilities and, last, the weight: one collective for both.
  std::vector<double> sums(mine.probabilities.size() + 1);
  for (std::size_t i = 0; i < mine.probabilities.size(); ++i)
    sums[i] = weight * mine.probabilities[i];
  sums.back() = weight;
  peers.allreduce_sum(std::span<double>(sums));
  if (!(sums.back() > 0.0))
    throw std::invalid_argument(fmt::format("mean_over_peers: the weights sum to {}", sums.back()));
  Predictions out{mine.classes, std::vector<float>(mine.probabilities.size())};
  for (std::size_t i = 0; i < out.probabilities.size(); ++i)
    out.probabilities[i] = static_cast<float>(sums[i] / sums.back());
  return out;
}

std::vector<int> vote_over_peers(const Predictions& mine, const Communicator& peers) {
  const int classes = mine.classes;
  const std::int64_t samples = mine.samples();
  const auto choice = predicted_classes(mine);
  // Votes, then probabilities: the vote counts and the tie-break in one allreduce.
  std::vector<double> sums(static_cast<std::size_t>(2 * samples * classes), 0.0);
  for (std::int64_t s = 0; s < samples; ++s)
    sums[static_cast<std::size_t>(s * classes + choice[static_cast<std::size_t>(s)])] = 1.0;
  for (std::size_t i = 0; i < mine.probabilities.size(); ++i)
    sums[static_cast<std::size_t>(samples * classes) + i] = mine.probabilities[i];
  peers.allreduce_sum(std::span<double>(sums));
  std::vector<int> out(static_cast<std::size_t>(samples));
  for (std::int64_t s = 0; s < samples; ++s) {
    const double* v = sums.data() + s * classes;
    const double* p = sums.data() + samples * classes + s * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (v[c] > v[best] || (v[c] == v[best] && p[c] > p[best])) best = c;
    out[static_cast<std::size_t>(s)] = best;
  }
  return out;
}

}  // namespace strata
