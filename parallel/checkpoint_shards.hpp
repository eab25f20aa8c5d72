// A model-parallel replica's checkpoint written and read by its shards together: each writes and
// reads only its own slices of the one file's datasets, so no rank ever holds the whole state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/state.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// How a sliced tensor's slices lie in the whole: `outer` blocks before the split axis, each holding
// the M slices' runs of `extent x inner` values side by side (`full` = M x extent along the axis).
struct SliceLayout {
  std::int64_t extent, full, outer = 1, inner = 1;
};
// The layout of `t`, shard model.rank() of model.size(). Throws std::invalid_argument naming `key`
// when `t` is not that shard's equal share at offset rank x extent.
SliceLayout slice_layout(const std::string& key, const StateTensor& t, const Communicator& model);

// Writes the checkpoint of `local`, this shard's state (slices with ShardSpec::axis >= 0, whole
// tensors, scalars), at `path`: the same file write_checkpoint writes for the gathered state, a
// checksum on every whole tensor. Shard 0 of `model` writes the file's structure, the whole
// tensors and the scalars (its own), under a temporary name; then every shard writes its slices
// into it at their offsets and syncs them; then shard 0 renames it. The slices' checksums are
// combined from each shard's runs. Collective over `model`: every shard passes the same keys and
// shapes. A failure on any shard (a full disk) throws DataError with the same message on every
// shard, and leaves nothing under `path` or the temporary name. `progress(done, total)` follows
// each sliced tensor this shard has written.
void write_checkpoint_shards(const std::filesystem::path& path, const StateDict& local,
                             const Communicator& model,
                             const std::function<void(std::size_t, std::size_t)>& progress = {});

// Reads this shard's part of the checkpoint at `path`: the slices `layout` (this shard's own
// state) holds, and the whole tensors and scalars (read_checkpoint_slices), and verifies every
// checksum, a slice's against its whole tensor's, combined from every shard's runs, so that no
// rank reads the whole state. Collective over `model`, whose shards pass layouts of one model
// split the same way; a missing or damaged file throws DataError, and one of another model (a split
// tensor of another shape) CheckpointMismatch, on every shard alike.
StateDict read_checkpoint_shards(const std::string& path, const StateDict& layout,
                                 const Communicator& model);

}  // namespace strata
