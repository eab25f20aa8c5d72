#!/usr/bin/env bash
# Console output made for thousands of groups: a 4-rank, 4-group train stage prints start-up facts
# once, then one progress line per interval for the whole stage (not one per group), a table across
# members at the end, and each member's detail in members/<m>/log.txt; --verbose adds every
# group's own lines, each with its [g<n>] prefix.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
cd "$work"
cat > console.yaml <<YAML
run: {name: console, seed: 3, threads: 1}
data: {source: synthetic, synthetic: {train: 6000, test: 500, classes: 4, channels: 1, height: 28, width: 28}}
model: {layers: [flatten, {dense: {units: 256}}, relu, {dense: {units: 4}}]}
training: {epochs: 4, local_batch: 32}
output: {dir: $work/quiet, progress_seconds: 0.5}
YAML
start=$EPOCHREALTIME
timeout 300 "$MPIEXEC" -n 4 "$STRATA" run console.yaml > quiet.log 2>&1 || { echo "FAIL: the run failed"; cat quiet.log; exit 1; }
end=$EPOCHREALTIME
"$PYTHON3" - quiet.log "$start" "$end" "$work/quiet" <<'PY' || fails=$((fails + 1))
import re, sys, os
lines = open(sys.argv[1]).read().splitlines()
wall, out = float(sys.argv[3]) - float(sys.argv[2]), sys.argv[4]
progress = [l for l in lines if re.match(r"\[train\] 4 members: \d+ done, \d+ running", l)]
problems = []
# One line per 0.5 s interval for the whole stage, plus the last: never one per group per interval.
if not 2 <= len(progress) <= wall / 0.5 + 2:
    problems.append(f"{len(progress)} progress lines in {wall:.1f} s at 0.5 s intervals")
if not progress or "4 done" not in progress[-1]:
    problems.append("the last progress line does not say all 4 are done")
for pattern in (r"^\[epoch ", r"^\[g\d", r"^\[m\d", r"^\[train\] epoch ", r"^\[kernels\] \S+: oneDNN"):
    if any(re.search(pattern, l) for l in lines):
        problems.append(f"a per-group line /{pattern}/ on the console")
for fact in ("[device]", "[kernels]", "[data]", "[model]"):
    if sum(l.startswith(fact) for l in lines) != 1:
        problems.append(f"{fact} printed {sum(l.startswith(fact) for l in lines)} times, not once")
if any("CUDA driver version" in l for l in lines):
    problems.append("the CUDA runtime's error reaches the console")
# Start-up facts come before the first progress line.
first_progress = lines.index(progress[0]) if progress else len(lines)
if any(l.startswith("[kernels]") for l in lines[first_progress:]):
    problems.append("[kernels] after training started")
table = [l for l in lines if re.match(r"\s+\d+\s+\d+\s+4\s+\d\.\d{4}\s+\d\.\d{4}\s+\d\.\d{4}", l)]
if len(table) != 4:
    problems.append(f"the summary table has {len(table)} member rows, not 4")
for m in range(4):
    log = os.path.join(out, "members", str(m), "log.txt")
    text = open(log).read() if os.path.exists(log) else ""
    if len(re.findall(r"^\[epoch \d/4\]", text, re.M)) != 4 or f"member {m}:" not in text:
        problems.append(f"members/{m}/log.txt lacks its 4 epoch lines")
print("FAIL: " + "; ".join(problems) if problems else
      f"ok: {len(progress)} progress lines in {wall:.1f} s, start-up facts once, a 4-row table, 4 member logs")
sys.exit(1 if problems else 0)
PY
sed "s|dir: $work/quiet|dir: $work/verbose|" console.yaml > verbose.yaml
timeout 300 "$MPIEXEC" -n 4 "$STRATA" run verbose.yaml --verbose > verbose.log 2>&1 || { echo "FAIL: the verbose run failed"; fails=$((fails + 1)); }
"$PYTHON3" - verbose.log <<'PY' || fails=$((fails + 1))
import re, sys
lines = open(sys.argv[1]).read().splitlines()
epochs = [l for l in lines if "[epoch " in l]
groups = {int(m.group(1)) for l in epochs for m in [re.match(r"\[g(\d+)\] \[epoch \d/4\]", l)] if m}
bare = [l for l in epochs if not re.match(r"\[g\d+\] ", l)]
ok = groups == {0, 1, 2, 3} and len(epochs) == 16 and not bare
print("ok: --verbose: 16 epoch lines, every one prefixed [g<n>], from groups 0-3" if ok else
      f"FAIL: --verbose: groups {sorted(groups)}, {len(epochs)} epoch lines, {len(bare)} without a prefix")
sys.exit(0 if ok else 1)
PY
# A single training prints its own lines and no stage line for all members.
sed -e "s|dir: $work/quiet|dir: $work/single|" -e 's/epochs: 4/epochs: 2/' console.yaml > single.yaml
if timeout 120 "$STRATA" run single.yaml 2>&1 | grep -q 'members: '; then
  echo "FAIL: a single training printed a line for all members"; fails=$((fails + 1))
else
  echo "ok: a single training prints no line for all members"
fi
# A signal that reaches one group's process only (not the job's launcher) stops every group: world
# rank 0 tells the others, all checkpoint and the job exits 75; the rerun finishes both members.
sed -e "s|dir: $work/quiet|dir: $work/stop|" -e 's/epochs: 4/epochs: 30/' console.yaml > stop.yaml
timeout 300 "$MPIEXEC" -n 2 "$STRATA" run stop.yaml > stop.log 2>&1 &
launcher=$!
for _ in $(seq 1 300); do grep -q '^\[train\] 2 members: 0 done, 2 running' stop.log && break; sleep 0.1; done
rank1=""
for p in $(pgrep -f "strata run stop.yaml"); do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'PMI_RANK=1' && rank1=$p
done
if [ -z "$rank1" ]; then
  echo "FAIL: no rank 1 process to signal"; fails=$((fails + 1)); wait $launcher
else
  kill -USR1 "$rank1"
  wait $launcher; rc=$?
  epochs0=$(wc -l < "$work/stop/members/0/metrics.jsonl" 2>/dev/null || echo 0)
  if [ "$rc" = 75 ] && [ -d "$work/stop/checkpoints/stage0/member0" ] && [ "$epochs0" -lt 30 ]; then
    echo "ok: USR1 to rank 1 alone stopped both groups (exit 75; member 0 checkpointed after $epochs0 of 30 epochs)"
  else
    echo "FAIL: USR1 to rank 1: exit $rc, member 0 has $epochs0 epochs"; tail -5 stop.log; fails=$((fails + 1))
  fi
  expect_exit 0 '\[train\] 2 members: 2 done' -- timeout 300 "$MPIEXEC" -n 2 "$STRATA" run stop.yaml
fi
finish
