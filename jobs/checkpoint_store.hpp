// One training's (or the run's) checkpoints in a directory: ckpt-<sequence>.h5, written in the
// background (or by a model's shards together), the newest `keep` kept, and loaded
// newest-valid-first.
#pragma once

#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/state.hpp"
#include "core/trace.hpp"
#include "parallel/checkpoint_shards.hpp"
#include "parallel/communicator.hpp"

namespace strata {

struct LoadedCheckpoint {
  std::filesystem::path path;
  StateDict state;
};

class CheckpointStore {
 public:
  CheckpointStore(std::filesystem::path dir, int keep);
  // Waits for a write in flight (an error is printed: it cannot be thrown). A model's shards' write
  // not finished by finish_shards stays a temporary file: naming it takes the shards together.
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // The checkpoint files present, oldest first (by sequence number; temporary files excluded).
  std::vector<std::filesystem::path> list() const;
  // The newest checkpoint that reads and verifies. Each newer one that does not is reported
  // through `skipped` (file and reason) and, once a valid one is found, renamed aside to
  // <file>.damaged. nullopt when there is none; DataError
  // when there are some but none is valid: a run never silently starts over. A checkpoint of
  // another model (CheckpointMismatch) is not damage: it is thrown at once.
  std::optional<LoadedCheckpoint> load_newest(
      const std::function<void(const std::string&)>& skipped) const;
  // The same over `files` (oldest first, as list() gives them), each read and verified by `read`.
  // With a collective `read` (read_checkpoint_shards) every rank of the group passes the list one
  // rank made, so that all read the same files in the same order, and only that rank renames.
  std::optional<LoadedCheckpoint> load_newest_of(
      const std::vector<std::filesystem::path>& files,
      const std::function<void(const std::string&)>& skipped,
      const std::function<StateDict(const std::filesystem::path&)>& read,
      bool rename_damaged) const;

  // Writes `whole` (every tensor whole: one rank's model) in the background under the
  // next sequence number (write_checkpoint: temporary name, fsync, rename), then removes the
  // oldest beyond `keep`. Waits for the previous write first, and rethrows its error.
  // `complete`, if set, runs on the writer thread before the write and finishes `whole` (a GPU's
  // state still on its way: Trainer::save_state_in_flight).
  void save(StateDict whole, std::function<void(StateDict&)> complete = {});
  // A model-parallel replica's checkpoint: every shard of `model` writes its own slices into the
  // one file under the next sequence number (ShardedCheckpointWrite: no shard holds the whole
  // state), in the background. Finishes the previous one first. `local` must not change until
  // finish_shards(). Collective over `model`, whose shard 0 names the file; a failure to begin
  // throws DataError on every shard alike.
  void save_shards(const StateDict& local, const Communicator& model);
  // Waits for every shard's part of the checkpoint save_shards began, then names the file and
  // removes the oldest beyond `keep`; nothing when none is in flight. Collective over that
  // `model`; a failed write throws DataError on every shard alike.
  void finish_shards();
  // Whether a save_shards write is in flight, and whether this shard's part of it is still being
  // written.
  bool shards_in_flight() const { return shard_write_.has_value(); }
  bool shard_writing() const { return shard_write_ && !shard_write_->written(); }
  // Waits for the write in flight; throws DataError if it failed.
  void wait();
  // Records each background write on `trace` (null: off).
  void set_trace(Trace* trace) { trace_ = trace; }
  // After wait(): the last state written, whose buffers the next snapshot can reuse.
  StateDict take_buffers() { return std::move(written_); }

 private:
  // The next checkpoint's file name, its directory created. Throws DataError.
  std::filesystem::path next_path();
  // Removes the oldest checkpoints beyond `keep`.
  void prune() const;

  std::filesystem::path dir_;
  int keep_;
  std::int64_t next_sequence_ = 1;
  int writes_ = 0;
  std::thread writer_;
  StateDict written_;  // what the writer thread writes; only it touches it until wait()
  std::exception_ptr error_;
  Trace* trace_ = nullptr;
  std::optional<ShardedCheckpointWrite> shard_write_;  // save_shards' write, until finish_shards
  bool shard_root_ = false;                            // whether this shard names the files
};

// The sequence number of a checkpoint file name ("ckpt-00000012.h5" -> 12), or -1.
std::int64_t checkpoint_sequence(const std::filesystem::path& file);

}  // namespace strata
