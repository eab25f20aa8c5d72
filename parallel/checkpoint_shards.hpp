// A model-parallel replica's checkpoint written and read by its shards together: each writes and
// reads only its own slices of the one file's datasets, so no rank ever holds the whole state.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/state.hpp"
#include "core/trace.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// How a sliced tensor's slices lie in the whole: `outer` blocks before the split axis, each holding
// the M slices' runs of `extent x inner` values side by side (`full` = M x extent along the axis).
struct SliceLayout {
  std::int64_t extent, full, outer = 1, inner = 1;
};
// One of a shard's sliced tensors, pointing into its state.
struct ShardSlice {
  const std::string* key;
  const StateTensor* tensor;
  SliceLayout layout;
};

// The layout of `t`, shard model.rank() of model.size(). Throws std::invalid_argument naming `key`
// when `t` is not that shard's equal share at offset rank x extent.
SliceLayout slice_layout(const std::string& key, const StateTensor& t, const Communicator& model);

// The checkpoint of `local`, this shard's state (slices with ShardSpec::axis >= 0, whole tensors,
// scalars), written at `path` by the shards of `model` together: the tensors, checksums and
// scalars write_checkpoint writes for the gathered state. The constructor (collective
// over `model`) has shard 0 write the file's structure, its whole tensors and the scalars under a
// temporary name; then every shard writes its slices at their offsets, syncs them and computes
// their runs' checksums, on a thread of its own. finish() (collective) waits for every shard, has
// shard 0 record each sliced tensor's checksum, combined from every shard's runs, and rename the
// file. `local` must not change until then. A failure on any shard (a full disk) throws
// DataError on every shard alike, from the constructor or from finish(), and leaves nothing under
// `path` or the temporary name. Destroyed unfinished, it waits for its thread and leaves only the
// temporary file. `progress(done, total)` follows each sliced tensor this shard has written, on
// that thread.
class ShardedCheckpointWrite {
 public:
  // `trace` (null: off) records the thread's write.
  ShardedCheckpointWrite(std::filesystem::path path, const StateDict& local,
                         const Communicator& model,
                         std::function<void(std::size_t, std::size_t)> progress = {},
                         Trace* trace = nullptr);
  ShardedCheckpointWrite(const ShardedCheckpointWrite&) = delete;
  ShardedCheckpointWrite& operator=(const ShardedCheckpointWrite&) = delete;
  ~ShardedCheckpointWrite();
  void finish();
  // Whether this shard's thread has written (or failed to write) its slices: then finish() waits
  // only for the other shards and shard 0's recording of the checksums.
  bool written() const { return written_.load(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_, temporary_;
  const Communicator& model_;
  std::vector<ShardSlice> slices_;
  std::vector<std::uint32_t> run_checksums_;  // the writer thread's, read after it is joined
  std::exception_ptr error_;                  // the writer thread's, read after it is joined
  std::atomic<bool> written_{false};
  std::thread writer_;
};

// A ShardedCheckpointWrite finished at once.
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
