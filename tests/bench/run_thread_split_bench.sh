#!/usr/bin/env bash
# The benchmark MLP's two worker threads splitting each dense layer's units against splitting the
# batch, in turns in one run (strata_bench_thread_split). Prints a Markdown table on stdout.
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
