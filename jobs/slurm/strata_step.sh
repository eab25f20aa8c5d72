#!/usr/bin/env bash
# The srun step of strata's Slurm job scripts: runs `strata ARGS...` on every task of the job,
# forwards the stop signals to it, and requeues the job when strata exits 75 (checkpointed on a
# signal). Usage, from a batch script: exec jobs/slurm/strata_step.sh run CONFIG [options]
#
# Slurm sends --signal=B:<sig>@<seconds> to the batch shell only, and bash runs no trap while a
# foreground child runs: so the step runs in the background, and the trap passes the signal to
# srun, which passes it to every task.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
strata="${STRATA:-$root/build/strata}"
# OMP_WAIT_POLICY must be set before strata starts.
source "$root/jobs/env.sh"
# strata splits each batch over its own worker threads with single-threaded kernels inside.
export OMP_NUM_THREADS=1
args=("$@")
if [ -n "${SLURM_CPUS_PER_TASK:-}" ] && [[ " $* " != *" --threads "* ]]; then
  args+=(--threads "$SLURM_CPUS_PER_TASK")
fi
job="${SLURM_JOB_ID:-none}"
[ -n "${SLURM_ARRAY_JOB_ID:-}" ] && job="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
echo "[job] $job restart ${SLURM_RESTART_COUNT:-0} on ${SLURM_JOB_NUM_NODES:-1} node(s), ${SLURM_NTASKS:-1} task(s): $strata ${args[*]}"

# Traps before the step starts, so that an early signal is kept and passed on, not fatal here.
step=""
pending=""
pass_on() {
  echo "[job] SIG$1: passing it to the strata step"
  if [ -n "$step" ]; then kill -"$1" "$step" 2>/dev/null; else pending="$1"; fi
}
for sig in USR1 USR2 TERM INT HUP; do
  # shellcheck disable=SC2064
  trap "pass_on $sig" "$sig"
done
srun --mpi=pmi2 --kill-on-bad-exit=1 "$strata" "${args[@]}" &
step=$!
[ -n "$pending" ] && kill -"$pending" "$step" 2>/dev/null
# A trap interrupts `wait`; wait again until the step has really ended.
while :; do
  wait "$step"
  rc=$?
  kill -0 "$step" 2>/dev/null || break
done
if [ "$rc" = 75 ]; then
  echo "[job] strata checkpointed and stopped (exit 75): requeueing job $job"
  scontrol requeue "$job" || echo "[job] scontrol requeue $job failed: resubmit this script to resume"
fi
exit "$rc"
