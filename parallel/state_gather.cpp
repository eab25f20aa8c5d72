#include "parallel/state_gather.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

StateDict gather_whole_state(const StateDict& local, const Communicator& model) {
  StateDict whole;
  std::vector<float> scratch;
  gather_whole_state(local, model, whole, scratch);
  return whole;
}

void gather_whole_state(const StateDict& local, const Communicator& model, StateDict& whole,
                        std::vector<float>& scratch) {
  whole.scalars() = local.scalars();
  for (const auto& [key, t] : local.tensors()) {
    if (t.shard.axis < 0) {
      whole.put_tensor(key, t.values, t.local_shape, t.shard);
      continue;
    }
    const auto axis = static_cast<std::size_t>(t.shard.axis);
    const std::int64_t extent = t.local_shape.at(axis), full = t.shard.whole.at(axis);
    if (extent * model.size() != full || t.shard.offset != extent * model.rank())
      throw std::invalid_argument(
          fmt::format("gather_whole_state: {} is slice [{}, {}) of {} on shard {} of {}", key,
                      t.shard.offset, t.shard.offset + extent, full, model.rank(), model.size()));
    std::int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < axis; ++i) outer *= t.shard.whole[i];
    for (std::size_t i = axis + 1; i < t.shard.whole.size(); ++i) inner *= t.shard.whole[i];
    StateTensor& out = whole.tensors()[key];
    out.shard = ShardSpec::whole_tensor(t.shard.whole);
    out.local_shape = t.shard.whole;
    out.values.resize(static_cast<std::size_t>(element_count(t.shard.whole)));
    // Slices of the first non-trivial axis are already the whole tensor's blocks, in shard order.
    if (outer == 1) {
      model.allgather(t.values, out.values);
      continue;
    }
    scratch.resize(out.values.size());
    model.allgather(t.values, scratch);
    const auto block_size = static_cast<std::int64_t>(t.values.size());
    for (std::int64_t m = 0; m < model.size(); ++m)
      for (std::int64_t o = 0; o < outer; ++o)
        std::copy_n(scratch.data() + m * block_size + o * extent * inner, extent * inner,
                    out.values.data() + (o * full + m * extent) * inner);
  }
}

}  // namespace strata
