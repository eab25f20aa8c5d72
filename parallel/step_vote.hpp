// The ranks of a group agreeing, step by step, on flags any of them raised (a stop signal, a
// trial over its time limit, a checkpoint due by the clock), without a blocking collective per
// step.
#pragma once

#include <array>
#include <cstdint>

#include "parallel/communicator.hpp"

namespace strata {

// Each call starts a non-blocking sum of this rank's flags and reads the sum started at the
// previous call, which that step's own communication has completed by then. So every rank gets
// the same answer at the same call, one call after the first rank raised a flag, and no step waits
// for the vote. Every rank of `group` must call exchange() equally often. A vote still in flight
// when the object goes away is completed by the request's destructor, on every rank alike.
class StepVote {
 public:
  static constexpr int max_flags = 4;
  explicit StepVote(const Communicator& group) : group_(group) {}
  StepVote(const StepVote&) = delete;
  StepVote& operator=(const StepVote&) = delete;

  // Bit i of the result: some rank raised flag i (bit i of `mine`) at the previous call. On a
  // one-rank group, `mine` itself, at once.
  unsigned exchange(unsigned mine);

 private:
  const Communicator& group_;
  std::array<float, max_flags> counts_{};  // the buffer of the vote in flight
  Request pending_;                        // declared after counts_: completes before it goes away
};

}  // namespace strata
