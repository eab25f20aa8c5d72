#!/usr/bin/env bash
# On a fresh Debian 12 machine: installs what is missing, builds strata, and runs
# configs/combined_small.yaml under mpiexec on 2 ranks: a genetic search on Fashion-MNIST, an
# ensemble of its best configs, and a few-sample transfer of its best model to new classes. A few
# minutes on 2 cores; safe to run again (it starts over).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs/setup.sh
source jobs/env.sh
build="${STRATA_BUILD_DIR:-build}"
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
config=configs/combined_small.yaml
out=runs/combined_small

echo "== strata quickstart: $mpiexec -n 2 $build/strata run $config --fresh"
"$mpiexec" -n 2 "$build/strata" run "$config" --fresh
"$build/strata" report "$out" > /dev/null
echo
echo "Where the results are:"
echo "  $out/report.html               everything below as one page (open it in a browser)"
echo "  $out/trials.csv, trials.jsonl  the search: a row per training; hpo_summary.json its best"
echo "  $out/best.yaml                 the best trial as a plain config (strata run it again)"
echo "  $out/ensemble_report.json      each ensemble member's accuracy and each combiner's"
echo "  $out/transfer_report.json      few-sample transfer against training from scratch"
echo "  $out/artifacts.json            what each stage handed on, with its files"
echo "Score the ensemble again with: $build/strata predict $config $out"
