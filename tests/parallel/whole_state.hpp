// The tests' view of a model-parallel replica's state as whole tensors, gathered over its shards:
// what a checkpoint holds, to compare decompositions with.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/state.hpp"
#include "parallel/checkpoint_shards.hpp"
#include "parallel/communicator.hpp"

namespace strata::testing {

// Every tensor of `local` that is a slice gathered over `model` into the whole tensor; whole
// tensors and scalars are copied. Collective over `model`.
inline StateDict gather_whole_state(const StateDict& local, const Communicator& model) {
  StateDict whole;
  whole.scalars() = local.scalars();
  std::vector<float> slices;
  for (const auto& [key, t] : local.tensors()) {
    if (t.shard.axis < 0) {
      whole.put_tensor(key, t.values, t.local_shape, t.shard);
      continue;
    }
    const SliceLayout l = slice_layout(key, t, model);
    slices.resize(t.values.size() * static_cast<std::size_t>(model.size()));
    model.allgather(t.values, slices);
    StateTensor& out = whole.tensors()[key];
    out.shard = ShardSpec::whole_tensor(t.shard.whole);
    out.local_shape = t.shard.whole;
    out.values.resize(slices.size());
    // Shard m's block o goes to block o's m-th run.
    for (std::int64_t m = 0; m < model.size(); ++m)
      for (std::int64_t o = 0; o < l.outer; ++o)
        std::copy_n(slices.data() + (m * l.outer + o) * l.extent * l.inner, l.extent * l.inner,
                    out.values.data() + (o * l.full + m * l.extent) * l.inner);
  }
  return whole;
}

}  // namespace strata::testing
