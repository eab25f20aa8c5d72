// Turns the errors of one trial's training into a recorded failure wherever that cannot leave a
// rank of the member group behind in a collective; elsewhere the error stops the job.
#pragma once

#include <functional>

#include "hpo/trial_log.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// Runs a trial in two phases on every rank of `member`:
//  - `build` (instantiate the config, build the model): whatever it throws, on any rank, fails
//    the trial on all of them: the group agrees on it (agree_on_failure), and every rank records
//    the first failing rank's message. A collective call inside it (GroupTraining's own
//    agreements among them) must not follow anything that can fail on one rank alone, unless that
//    is agreed on first.
//  - `train` runs only if the build succeeded on every rank. DivergedError and ConfigError, which
//    every rank of a group raises at the same point (the loss is reduced over the group), and on a
//    one-rank group any std::exception, fail the trial. On a group of several ranks any other
//    exception is rethrown, naming the trial: its peers may be waiting in a collective that it
//    will never enter, so only stopping the job is safe. Interrupted (a stop signal the group
//    agreed on), DataError (a full disk, a damaged checkpoint) and what is not a std::exception
//    (such as the scheduler's signal that the coordinator failed) pass through untouched.
TrialOutcome run_guarded_trial(const Communicator& member, int trial_id,
                               const std::function<void()>& build,
                               const std::function<TrialOutcome()>& train);

}  // namespace strata
