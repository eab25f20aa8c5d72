#include "parallel/state_gather.hpp"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace strata {

namespace {

// Shard m's slice placed into the whole tensor.
void place_slice(const SliceLayout& l, std::int64_t m, const float* slice,
                 std::vector<float>& whole) {
  for (std::int64_t o = 0; o < l.outer; ++o)
    std::copy_n(slice + o * l.extent * l.inner, l.extent * l.inner,
                whole.data() + (o * l.full + m * l.extent) * l.inner);
}

// The slices of every shard, back to back in shard order, placed into the whole tensor.
void place_slices(const SliceLayout& l, std::int64_t shards, const std::vector<float>& slices,
                  std::vector<float>& whole) {
  const std::int64_t block_size = l.outer * l.extent * l.inner;
  for (std::int64_t m = 0; m < shards; ++m)
    place_slice(l, m, slices.data() + m * block_size, whole);
}

StateTensor& whole_tensor_for(StateDict& whole, const std::string& key, const StateTensor& t) {
  StateTensor& out = whole.tensors()[key];
  out.shard = ShardSpec::whole_tensor(t.shard.whole);
  out.local_shape = t.shard.whole;
  out.values.resize(static_cast<std::size_t>(element_count(t.shard.whole)));
  return out;
}

}  // namespace

StateDict gather_whole_state(const StateDict& local, const Communicator& model) {
  StateDict whole;
  std::vector<float> scratch;
  whole.scalars() = local.scalars();
  for (const auto& [key, t] : local.tensors()) {
    if (t.shard.axis < 0) {
      whole.put_tensor(key, t.values, t.local_shape, t.shard);
      continue;
    }
    const SliceLayout l = slice_layout(key, t, model);
    StateTensor& out = whole_tensor_for(whole, key, t);
    // Slices of the first non-trivial axis are already the whole tensor's blocks, in shard order.
    if (l.outer == 1) {
      model.allgather(t.values, out.values);
      continue;
    }
    scratch.resize(out.values.size());
    model.allgather(t.values, scratch);
    place_slices(l, model.size(), scratch, out.values);
  }
  return whole;
}

SliceLayout slice_layout(const std::string& key, const StateTensor& t, const Communicator& model) {
  const auto axis = static_cast<std::size_t>(t.shard.axis);
  SliceLayout l{t.local_shape.at(axis), t.shard.whole.at(axis)};
  if (l.extent * model.size() != l.full || t.shard.offset != l.extent * model.rank())
    throw std::invalid_argument(fmt::format("{} is slice [{}, {}) of {} on shard {} of {}", key,
                                            t.shard.offset, t.shard.offset + l.extent, l.full,
                                            model.rank(), model.size()));
  for (std::size_t i = 0; i < axis; ++i) l.outer *= t.shard.whole[i];
  for (std::size_t i = axis + 1; i < t.shard.whole.size(); ++i) l.inner *= t.shard.whole[i];
  return l;
}

}  // namespace strata
