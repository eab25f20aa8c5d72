#!/usr/bin/env bash
# How two worker threads share a step, two ways against each other in turns in one run
# (strata_bench_thread_split): the benchmark MLP's workers splitting each dense layer's units
# against splitting the batch, and the benchmark CNN's workers taking the optimizer step as their
# backward passes finish it against one step after backward. Prints Markdown tables on stdout.
#
#   tests/bench/run_thread_split_bench.sh [BUILD_DIR] [-- extra strata_bench_thread_split options]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "run_thread_split_bench.sh: $build is not a configured build directory (run jobs/setup.sh)" >&2
  exit 1
fi
cmake --build "$build" --target strata_bench_thread_split -j "$(nproc)" >&2
exec "$build/strata_bench_thread_split" "$@"
