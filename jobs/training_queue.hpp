// A stage's list of trainings, run on the member groups: a group that finishes one takes the next
// (the trial scheduler), each training resumes from its own checkpoints, and a journal of finished
// ones lets a restart skip them.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/trainer.hpp"
#include "hpo/trial_log.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// One training of a queue, as its member group runs it.
struct TrainingJob {
  Config config;  // output.dir: where metrics.jsonl and weights.h5 go
  const TrainingData* data = nullptr;
  std::filesystem::path checkpoints;  // its own checkpoints, removed once it is done
  std::string label;                  // "member 3: ", for resume lines
  StateDict meta;                     // saved under meta/ in its checkpoints
  // Called on every rank after the trainer is built, before resuming from a checkpoint: loading
  // pretrained weights. Must make no collective call over more than the member group.
  std::function<void(Trainer&)> prepare;
  // Called on every rank after the last epoch and the final weights: predictions.
  std::function<void(Trainer&)> finish;
};

// Trains `job` on this member group to its end; errors become a failed outcome where that is safe
// (run_guarded_trial). `build` makes the job (it may throw: a bad config fails only this training).
TrialOutcome train_job(const StageContext& c, int id, const std::function<TrainingJob()>& build,
                       const std::function<void()>& serve);

// Runs trainings 0..count-1 over the member groups with `run(id, serve)`, journaled in
// <journal_dir>/trials.jsonl (and .csv). On world rank 0 `describe(id)` names a training in
// progress lines. Collective over the world; returns, on every rank, whether each training ended
// well. Throws Interrupted after checkpointing when a stop signal arrives.
std::vector<bool> run_training_queue(
    const StageContext& c, const std::string& what, const std::filesystem::path& journal_dir,
    int count, const std::function<TrialOutcome(int id, const std::function<void()>& serve)>& run,
    const std::function<std::string(int id)>& describe);

}  // namespace strata
