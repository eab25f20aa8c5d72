#!/usr/bin/env bash
# Runs one benchmark with the least work it takes and fails unless it exits 0 and prints a Markdown
# table with a row under its header: what CTest's bench tests check, so that a change that breaks a benchmark fails a test.
# Its numbers are not checked: on a shared machine they measure the machine.
#
#   tests/bench/smoke.sh COMMAND [ARGS...]
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: tests/bench/smoke.sh COMMAND [ARGS...]" >&2; exit 2; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$@" > "$out"
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
  echo "smoke.sh: '$*' exited $rc" >&2
  exit 1
fi
if ! awk '/^\| *---/ { body = 1; next } body && /^\| / { found = 1 } END { exit !found }' "$out"; then
  echo "smoke.sh: '$*' printed no table row" >&2
  exit 1
fi
