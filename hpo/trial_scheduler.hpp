// Runs a search's trials on the member groups: a group that finishes a trial takes the next one.
#pragma once

#include <functional>
#include <vector>

#include "hpo/search.hpp"
#include "hpo/trial_log.hpp"
#include "parallel/topology.hpp"

namespace strata {

// What a trial's evaluation may ask of the scheduler while it runs.
struct TrialChannel {
  // Must be called now and then during long work (at training step boundaries): on world rank 0,
  // which coordinates, it answers the other groups' requests; elsewhere it does nothing. When the
  // coordinator's own work fails, it throws an object that is not a std::exception: let it
  // through.
  std::function<void()> serve;
  // Reports the trial's validation value after `epoch` (1-based) and returns whether the search's
  // pruning rule stops the trial there. Collective over the member group: every rank calls it at
  // the same epoch, and all get the coordinator's verdict. False at once without pruning.
  std::function<bool(int epoch, double value)> stop_after_epoch;
  void operator()() const { serve(); }
};

// Evaluates one trial on every rank of a member group together.
using EvaluateTrial = std::function<TrialOutcome(const Trial& trial, const TrialChannel& channel)>;
// On world rank 0: whether the pruning rule stops `trial_id` at `epoch` with `value`. Given on
// every rank when the search prunes (empty on every rank otherwise).
using EpochVerdict = std::function<bool(int trial_id, int epoch, double value)>;
// Called on world rank 0 as each trial ends, after the search has its result (for the trial log).
using TrialFinished = std::function<void(const Trial& trial, const TrialOutcome& outcome)>;

// dynamic: a group that finishes takes the next trial. waves: trial i of a generation always goes
// to group i mod G, as a fixed wave-per-generation schedule would do (the baseline benchmarks
// compare to).
enum class Assignment { dynamic, waves };

struct SchedulerStats {
  double wall_seconds = 0.0;
  double busy_seconds = 0.0;  // this rank's time inside `evaluate`
};

// Whether this rank has been asked to stop (a stop signal); empty: never.
using StopRequested = std::function<bool()>;

// A trial that a group trains now, as the coordinator knows it.
struct TrialInFlight {
  int trial_id = -1;
  int group = 0;
  double seconds = 0.0;  // since the coordinator handed it out
};
// The trials in flight, listed when called: the list is built only when a line is printed.
using TrialsInFlight = std::function<std::vector<TrialInFlight>()>;
// Called on world rank 0 each time it serves the other groups (between its own training steps and
// while it waits): for progress lines while no result comes in. Must be cheap when it prints
// nothing.
using TrialsRunning = std::function<void(const TrialsInFlight& running)>;

// How run_trials hands out trials and what it asks of the caller on the way; all optional.
struct SchedulerOptions {
  Assignment assignment = Assignment::dynamic;
  StopRequested stop_requested;
  EpochVerdict epoch_verdict;
  TrialsRunning while_running;
};

// Collective over the world. World rank 0 coordinates and consults `search`; the search object of
// other ranks is not used. Each group's first member asks rank 0 for work by message (over the
// topology's world communicator), shares the trial with its group by broadcast (over `member`),
// and reports the outcome when asking for the next. Trials are handed out as groups ask, the
// search's unfinished() trials (of a resumed search) first, and the search consumes results in
// trial order, so the sequence of trials does not depend on which group finishes first. Returns
// when the search is done.
//
// Stopping: when `evaluate` throws Interrupted (its group agreed on a stop signal and
// checkpointed the trial), or the coordinator sees `stop_requested`, the coordinator tells every
// group to stop as it next asks, still recording the results that come in; the trials in flight
// stay unfinished, to be resumed. Every rank of an interrupted group, and the coordinator, then
// throw Interrupted; the other ranks return.
SchedulerStats run_trials(const Topology& topology, Search& search, const EvaluateTrial& evaluate,
                          const TrialFinished& finished, const SchedulerOptions& options = {});

}  // namespace strata
