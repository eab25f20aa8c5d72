#!/usr/bin/env bash
# Runs one benchmark and fails unless it exits 0 and prints a Markdown table with a row directly
# under its header's separator: what CTest's bench tests check, so that a change that breaks a
# benchmark fails a test. Its numbers are not checked: on a shared machine they measure the machine.
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
# A row directly under a separator: a header alone, or a second table's header, is not one.
if ! awk 'under && /^\| / && !/^\| *---/ { found = 1 } { under = /^\| *---/ } END { exit !found }' "$out"; then
  echo "smoke.sh: '$*' printed no table row" >&2
  exit 1
fi
