// Combining over the peers communicator gives what combining every member in one place would:
// each rank holds one member, and no rank sees the others'.
#include <catch2/catch.hpp>

#include <vector>

#include "ensemble/peer_combine.hpp"
#include "parallel/communicator.hpp"

using namespace strata;

namespace {

// Member r of n: 5 samples of 4 classes, different per member, each row summing to 1.
Predictions member_of(int r) {
  Predictions p{4, {}};
  for (int s = 0; s < 5; ++s) {
    std::vector<float> row{1.0f + static_cast<float>((r + s) % 4),
                           1.0f + static_cast<float>((2 * r + s) % 3), 2.0f,
                           1.0f + static_cast<float>(r % 2)};
    float total = 0.0f;
    for (float x : row) total += x;
    for (float x : row) p.probabilities.push_back(x / total);
  }
  return p;
}

}  // namespace

TEST_CASE("the sums over the peers equal combining every member in one place", "[mpi][ensemble]") {
  const Communicator world = Communicator::world();
  std::vector<Predictions> all;
  std::vector<double> weights;
  for (int r = 0; r < world.size(); ++r) {
    all.push_back(member_of(r));
    weights.push_back((0.5 + r) / (0.5 * world.size() * world.size()));
  }
  const auto r = static_cast<std::size_t>(world.rank());
  EnsembleSums sums(5, 4);
  sums.add(all[r], weights[r]);
  sums.sum_over(world);
  CHECK(sums.members() == world.size());
  const CombinedPredictions combined = sums.finish();
  const Predictions mean = combine_mean(all), weighted = combine_mean(all, weights);
  REQUIRE(combined.mean.probabilities.size() == mean.probabilities.size());
  for (std::size_t i = 0; i < mean.probabilities.size(); ++i) {
    CHECK(combined.mean.probabilities[i] == Approx(mean.probabilities[i]).epsilon(1e-6));
    CHECK(combined.weighted.probabilities[i] == Approx(weighted.probabilities[i]).epsilon(1e-6));
  }
  CHECK(combined.vote == combine_vote(all));
}

TEST_CASE("the combination does not depend on which group holds which member", "[mpi][ensemble]") {
  // 2N members: spread two per rank, or all on the last rank (the others add none).
  const Communicator world = Communicator::world();
  const int n = 2 * world.size();
  auto weight = [n](int m) { return (1.0 + m) / (n * (n + 1) / 2.0); };
  EnsembleSums spread(5, 4), one_place(5, 4);
  for (int m = 0; m < n; ++m) {
    if (m % world.size() == world.rank()) spread.add(member_of(m), weight(m));
    if (world.rank() == world.size() - 1) one_place.add(member_of(n - 1 - m), weight(n - 1 - m));
  }
  spread.sum_over(world);
  one_place.sum_over(world);
  const auto a = spread.finish(), b = one_place.finish();
  CHECK(a.mean.probabilities == b.mean.probabilities);  // to the bit
  CHECK(a.weighted.probabilities == b.weighted.probabilities);
  CHECK(a.vote == b.vote);
  CHECK(spread.members() == n);
}
