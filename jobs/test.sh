#!/usr/bin/env bash
# The same set-up as jobs/quickstart.sh (plus the Slurm daemons), then every test (unit, MPI,
# end-to-end, checkpoint/restart, a one-node Slurm) through CTest.
# Extra arguments go to ctest, e.g. jobs/test.sh -L unit  or  jobs/test.sh -R config
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# The job-script test starts a real one-node Slurm, and the report test a headless browser:
# install them too.
STRATA_INSTALL_ARGS="${STRATA_INSTALL_ARGS:---with-slurm --with-browser}" jobs/setup.sh
source jobs/env.sh
build="${STRATA_BUILD_DIR:-build}"
echo "== strata tests"
ctest --test-dir "$build" --output-on-failure --timeout 600 -j "$(nproc)" "$@"
