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

TEST_CASE("mean and vote over the peers equal combining every member in one place",
          "[mpi][ensemble]") {
  const Communicator world = Communicator::world();
  std::vector<Predictions> all;
  std::vector<double> weights;
  for (int r = 0; r < world.size(); ++r) {
    all.push_back(member_of(r));
    weights.push_back(0.5 + r);
  }
  const Predictions mine = member_of(world.rank());
  const Predictions mean =
      mean_over_peers(mine, weights[static_cast<std::size_t>(world.rank())], world);
  const Predictions local = combine_mean(all, weights);
  REQUIRE(mean.probabilities.size() == local.probabilities.size());
  for (std::size_t i = 0; i < local.probabilities.size(); ++i)
    CHECK(mean.probabilities[i] == Approx(local.probabilities[i]).epsilon(1e-6));
  CHECK(vote_over_peers(mine, world) == combine_vote(all));
}
