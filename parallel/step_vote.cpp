#include "parallel/step_vote.hpp"

namespace strata {

unsigned StepVote::exchange(unsigned mine) {
  if (group_.size() == 1) return mine;
  pending_.wait();
  unsigned voted = 0;
  for (int i = 0; i < max_flags; ++i)
    if (counts_[static_cast<std::size_t>(i)] > 0.0f) voted |= 1u << i;
  for (int i = 0; i < max_flags; ++i)
    counts_[static_cast<std::size_t>(i)] = (mine >> i) & 1u ? 1.0f : 0.0f;
  pending_ = group_.iallreduce_sum(std::span<float>(counts_));
  return voted;
}

}  // namespace strata
