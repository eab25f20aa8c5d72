#!/usr/bin/env bash
# The same set-up as jobs/quickstart.sh, then every test (unit, MPI, end-to-end) through CTest.
# Extra arguments go to ctest, e.g. jobs/test.sh -L unit  or  jobs/test.sh -R config
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs/setup.sh
source jobs/env.sh
build="${STRATA_BUILD_DIR:-build}"
echo "== strata tests"
ctest --test-dir "$build" --output-on-failure --timeout 600 -j "$(nproc)" "$@"
