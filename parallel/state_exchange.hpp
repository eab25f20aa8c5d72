// Training states sent between member groups point to point, shard by shard: population-based
// training's exploit, where a member continues from another member's weights and optimizer.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/state.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// `state` goes to rank `peer`.
struct StateSend {
  int peer = 0;
  const StateDict* state = nullptr;
};

// A state comes from rank `peer` into `state`, which already holds the receiver's own entries:
// the moved tensors must be there with the sender's keys and sizes (the same model and shard),
// and their values and the moved scalars are replaced.
struct StateReceive {
  int peer = 0;
  StateDict* state = nullptr;
};

// Moves the entries whose keys start with one of `prefixes` ("weights/", "optimizer/"): posts
// every send, then completes every receive in order. Messages between two ranks arrive in the
// order they were posted, so several states may pass between the same pair. Throws DataError on
// the receiver when the sender's entries are another model's, before any of them is replaced.
void exchange_states(const Communicator& comm, std::span<const StateSend> sends,
                     std::span<const StateReceive> receives, std::span<const std::string> prefixes,
                     int tag);

// The same move between two states of one rank (both members trained by this group).
void copy_state_entries(const StateDict& from, StateDict& into,
                        std::span<const std::string> prefixes);

}  // namespace strata
