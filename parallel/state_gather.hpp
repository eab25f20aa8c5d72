// Assembles a model-parallel replica's state into whole tensors, for a checkpoint that does not
// depend on the decomposition.
#pragma once

#include <vector>

#include "core/state.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// Every tensor of `local` that is a slice (ShardSpec::axis >= 0) gathered over `model` into the
// whole tensor; whole tensors and scalars are copied. Collective over `model`: every shard calls
// it with the same keys, in the same order (StateDict keeps them sorted). Each shard's slice must
// start at rank x extent, as the split layers lay them out.
StateDict gather_whole_state(const StateDict& local, const Communicator& model);
// The same on shard 0 of `model` only, which writes the checkpoint: the other shards send their
// slices and hold no whole tensor (their `whole` stays as it was). Into `whole`'s buffers from an
// earlier call; `scratch` grows to one slice, never to a whole tensor. Collective over `model`.
void gather_whole_state_to_root(const StateDict& local, const Communicator& model, StateDict& whole,
                                std::vector<float>& scratch);

}  // namespace strata
