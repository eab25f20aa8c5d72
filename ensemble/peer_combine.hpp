// Combining an ensemble's predictions over the peers communicator: each member group holds its own
// member's predictions, and no rank ever gathers every member's.
#pragma once

#include <vector>

#include "ensemble/combiners.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// The weighted mean of every peer's probabilities (`weight`: this peer's share, weights summed over
// the peers must be positive), on every peer: one allreduce of doubles. Equal to combine_mean of
// the members. Collective over `peers`.
Predictions mean_over_peers(const Predictions& mine, double weight, const Communicator& peers);

// The vote of every peer's most probable classes, with combine_vote's tie rule, on every peer: one
// allreduce of vote counts and summed probabilities. Collective over `peers`.
std::vector<int> vote_over_peers(const Predictions& mine, const Communicator& peers);

}  // namespace strata
