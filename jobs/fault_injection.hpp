// Faults the end-to-end tests inject at exact points that timing alone cannot hit (a kill in the
// middle of a checkpoint write): STRATA_FAULT="kill_at_step=120", "stop_at_step=40",
// "kill_in_write=3", "kill_before_exploit=2", "fail_at_step=40", "fail_in_build=1" or
// "fail_before_build=1". Unset in production; read once, never changed.
#pragma once

#include <cstdint>

namespace strata {

struct FaultPlan {
  std::int64_t kill_at_step = -1;  // SIGKILL this process after this global training step
  std::int64_t stop_at_step = -1;  // raise the stop signal after this global training step
  int kill_in_write = -1;          // SIGKILL halfway through this process's n-th checkpoint write
  // SIGKILL every process once pbt's journal holds this round, before any of its copies is made
  int kill_before_exploit = -1;
  // Throw a DataError on the world's last rank alone after this global training step: an error only
  // one rank hits (a full disk on its node), which must end the job, not hang it.
  std::int64_t fail_at_step = -1;
  // Throw on this world rank alone each time it builds a training, after its group's first
  // collectives: a failure one rank hits (its memory, its GPU) while its peers build on.
  int fail_in_build = -1;
  // The same before the build, while a search trial's config or a queued training's data is
  // prepared (before the group's first collective of it).
  int fail_before_build = -1;

  // STRATA_FAULT parsed; an unknown or malformed setting throws ConfigError.
  static const FaultPlan& from_environment();
};

enum class BuildFault { in_build, before_build };
// Throws std::runtime_error, naming the fault, where STRATA_FAULT's fail_in_build (in_build) or
// fail_before_build (before_build) names `world_rank`.
void inject_build_fault(BuildFault when, int world_rank);

}  // namespace strata
