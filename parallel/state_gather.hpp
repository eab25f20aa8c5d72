// Assembles a model-parallel replica's state into whole tensors, for a checkpoint that does not
// depend on the decomposition.
#pragma once

#include <string>

#include "core/state.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// Every tensor of `local` that is a slice (ShardSpec::axis >= 0) gathered over `model` into the
// whole tensor; whole tensors and scalars are copied. Collective over `model`: every shard calls
// it with the same keys, in the same order (StateDict keeps them sorted). Each shard's slice must
// start at rank x extent, as the split layers lay them out.
StateDict gather_whole_state(const StateDict& local, const Communicator& model);

// How a sliced tensor's slices lie in the whole: `outer` blocks before the split axis, each holding
// the M slices' runs of `extent x inner` values side by side (`full` = M x extent along the axis).
struct SliceLayout {
  std::int64_t extent, full, outer = 1, inner = 1;
};
// The layout of `t`, shard model.rank() of model.size(). Throws std::invalid_argument naming `key`
// when `t` is not that shard's equal share at offset rank x extent.
SliceLayout slice_layout(const std::string& key, const StateTensor& t, const Communicator& model);

}  // namespace strata
