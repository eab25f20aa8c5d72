#!/usr/bin/env bash
# On a fresh Debian 12 machine: installs what is missing, builds strata, and trains
# configs/quickstart.yaml (a small CNN on Fashion-MNIST) under mpiexec. Safe to run again.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs/setup.sh
source jobs/env.sh
build="${STRATA_BUILD_DIR:-build}"
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"

echo "== strata quickstart: $mpiexec -n 1 $build/strata run configs/quickstart.yaml --fresh"
"$mpiexec" -n 1 "$build/strata" run configs/quickstart.yaml --fresh
echo
echo "Results are in runs/quickstart/: metrics.jsonl (one line per epoch) and weights.h5 (final weights)."
echo "Check the weights again with: $build/strata predict configs/quickstart.yaml runs/quickstart/weights.h5"
