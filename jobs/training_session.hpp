// One training taken to its end across allocations: it resumes from its newest valid checkpoint,
// checkpoints every N steps or seconds and after every epoch, and on a stop signal checkpoints and
// throws Interrupted at the same step on every rank of its member group.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "core/config.hpp"
#include "core/trainer.hpp"
#include "jobs/checkpoint_store.hpp"
#include "jobs/stop_signals.hpp"
#include "parallel/step_vote.hpp"
#include "parallel/topology.hpp"

namespace strata {

struct SessionSettings {
  std::filesystem::path checkpoint_dir;  // this training's own checkpoints
  int epochs = 1;
  CheckpointConfig checkpoint;
  std::string label;  // how progress lines name this training: "", "[g1] ", "trial 17: "
  // Whether the last epoch ends with a checkpoint too. A search trial's result goes straight to
  // the coordinator, so that one would be written only to be deleted.
  bool checkpoint_last_epoch = true;
  StateDict meta;  // scalars saved under meta/ that say what this training is (stage, member)
  // Where its own lines (resumed from where) go, on the group's first rank; empty: stdout.
  std::function<void(const std::string&)> say;
  Trace* trace = nullptr;  // records its checkpoints; null: off
  // Where the group's first rank logs every step (steps.jsonl: loss, accuracy and learning rate
  // over the global batch); empty: nowhere.
  std::filesystem::path steps_log;
};

// Work a caller adds at every step boundary, on every rank of the group.
struct StepWork {
  std::function<void()> serve;  // a coordinator's answers to other groups
  // This rank's news that the job stops (another group got the signal): stops like a signal.
  std::function<bool()> stop_elsewhere;
  std::function<bool()> over_limit;  // this rank's opinion that the training must stop
  std::function<void()>
      stop_over_limit;  // called (on every rank alike) once the group agrees; throws
};

class TrainingSession {
 public:
  // `signals` may be null (nothing stops the training early). Collective calls run over the
  // topology's member group (the vote, loading) and model communicator (gathering shards).
  TrainingSession(Trainer& trainer, const Topology& topology, const StopSignals* signals,
                  SessionSettings settings, StepWork work = {});

  // Loads the newest valid checkpoint into the trainer when there is one (reporting each newer one
  // that is damaged) and returns where it resumed; nullopt: there was none. Throws DataError when
  // checkpoints exist but none is valid, or belong to another model. Collective over the group.
  std::optional<std::filesystem::path> resume();
  // Trains until trainer.position().epoch > epochs, calling on_epoch after each epoch (on every
  // rank) before the epoch's checkpoint.
  void run(int epochs, const ProgressCallback& on_progress,
           const std::function<void(const EpochMetrics&)>& on_epoch);
  // Writes a checkpoint of the trainer's state now (collective over the group), in the background:
  // on the group's first rank, or with M > 1 on every shard of the first replica, each its slices.
  void checkpoint();
  // Waits for the checkpoint write in flight and throws its error. Collective over the group: with
  // M > 1 the shards name the file together.
  void wait();
  // The trainer's weights as a weights file at `path`, whole: a model-parallel model is gathered
  // over its shards (collective over the model communicator) and the group's first rank writes.
  void save_final_weights(const std::filesystem::path& path);
  // Seconds this training has run, over every allocation (saved with its checkpoints).
  double elapsed_seconds() const;

 private:
  void at_step();
  void log_step();
  // The scalars under meta/ that say what and where this training is, into `state`.
  void put_meta(StateDict& state) const;
  // The newest valid checkpoint, read on every rank of the group, or nullopt; DataError on every
  // rank when there are some but none is valid. Whole: the leader chooses and verifies it, the
  // others read it. Shards: every rank reads its slices, the shards verifying them together.
  std::optional<LoadedCheckpoint> load_newest_whole();
  std::optional<LoadedCheckpoint> load_newest_shards();
  void report_skipped(const std::string& why) const;
  bool leader() const { return topology_.member().rank() == 0; }

  Trainer& trainer_;
  const Topology& topology_;
  const StopSignals* signals_;
  SessionSettings settings_;
  StepWork work_;
  CheckpointStore store_;
  StepVote vote_;
  StateDict shard_state_;           // a model-parallel shard's own state, reused
  int votes_since_shard_save_ = 0;  // step votes since a shard write began (counted up to 2)
  std::ofstream steps_;  // settings_.steps_log on the group's first rank, once a step is done
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  double elapsed_before_ = 0.0;  // in earlier allocations, as its checkpoint says
};

}  // namespace strata
