#include "parallel/state_gather.hpp"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace strata {

namespace {

// Apart from the trial scheduler's (71xx), the progress board's (72xx) and PBT's exploit (73xx)
// tags.
constexpr int tag_state_slice = 7400;

// How a sliced tensor's slices lie in the whole: `outer` blocks before the axis, each holding the
// M slices' `extent x inner` runs side by side.
struct SliceLayout {
  std::int64_t extent, full, outer = 1, inner = 1;
};

SliceLayout layout_of(const std::string& key, const StateTensor& t, const Communicator& model) {
  const auto axis = static_cast<std::size_t>(t.shard.axis);
  SliceLayout l{t.local_shape.at(axis), t.shard.whole.at(axis)};
  if (l.extent * model.size() != l.full || t.shard.offset != l.extent * model.rank())
    throw std::invalid_argument(
        fmt::format("gather_whole_state: {} is slice [{}, {}) of {} on shard {} of {}", key,
                    t.shard.offset, t.shard.offset + l.extent, l.full, model.rank(), model.size()));
  for (std::size_t i = 0; i < axis; ++i) l.outer *= t.shard.whole[i];
  for (std::size_t i = axis + 1; i < t.shard.whole.size(); ++i) l.inner *= t.shard.whole[i];
  return l;
}

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
    const SliceLayout l = layout_of(key, t, model);
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

void gather_whole_state_to_root(const StateDict& local, const Communicator& model, StateDict& whole,
                                std::vector<float>& scratch) {
  const bool root = model.rank() == 0;
  if (root) whole.scalars() = local.scalars();
  for (const auto& [key, t] : local.tensors()) {
    if (t.shard.axis < 0) {
      if (root) whole.put_tensor(key, t.values, t.local_shape, t.shard);
      continue;
    }
    const SliceLayout l = layout_of(key, t, model);
    if (!root) {
      model.send(t.values, 0, tag_state_slice);
      continue;
    }
    StateTensor& out = whole_tensor_for(whole, key, t);
    // Every shard's slice in shard order, the root's own first: straight into place when the
    // slices are the whole's blocks, else through one slice of scratch (never a whole tensor's).
    // A shard's sends wait for the root's receives, tensor by tensor, so no shard runs ahead.
    place_slice(l, 0, t.values.data(), out.values);
    const std::size_t block = t.values.size();
    for (int m = 1; m < model.size(); ++m) {
      if (l.outer == 1) {
        model.recv(std::span(out.values).subspan(static_cast<std::size_t>(m) * block, block), m,
                   tag_state_slice);
        continue;
      }
      scratch.resize(block);
      model.recv(scratch, m, tag_state_slice);
      place_slice(l, m, scratch.data(), out.values);
    }
  }
}

}  // namespace strata
