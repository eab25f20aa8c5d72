// The pieces of the console's progress lines that several stages print alike.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "hpo/trial_scheduler.hpp"

namespace strata {

// Formats seconds as "1h02m", "3m12s" or "42s".
std::string format_duration(double seconds);

// "2 running: trial 24 on group 0 for 1m12s, trial 25 on group 1 for 40s": the trainings in
// flight, the longest-running first and at most three named (thousands of groups must not make
// a line of thousands). `name(trial_id)` names one ("trial 24", "member 3").
std::string describe_running(std::span<const TrialInFlight> running,
                             const std::function<std::string(int trial_id)>& name);

}  // namespace strata
