#!/usr/bin/env bash
# Bad input gets its exit code and a message naming the place: malformed YAML, wrong types, unknown keys,
# a missing dataset, a truncated HDF5 file. None may crash or hang (each run is under timeout).
STRATA="$1"
source "$(dirname "$0")/lib.sh"
cd "$work"

write_synthetic_config out > good.yaml

printf 'run: {name: x\ndata: [1, 2\n' > malformed.yaml
expect_exit 2 'malformed.yaml:[0-9]+:[0-9]+: malformed YAML' -- "$STRATA" run malformed.yaml

sed 's/local_batch: 32/local_batch: many/' good.yaml > wrong_type.yaml
expect_exit 2 'wrong_type.yaml:14:16: training.local_batch: expected an integer' -- "$STRATA" run wrong_type.yaml

sed 's/epochs: 2/epochs: 2\n  epoch_count: 3/' good.yaml > unknown_key.yaml
expect_exit 2 'unknown_key.yaml:14:3: training.epoch_count: unknown key' -- "$STRATA" run unknown_key.yaml

sed 's/units: 4, init: glorot/units: 4, init: glorot, activation: relu/' good.yaml > unknown_layer_key.yaml
expect_exit 2 'unknown_layer_key.yaml:[0-9]+:[0-9]+: model.layers\[4\].dense.activation: unknown key' -- "$STRATA" run unknown_layer_key.yaml

sed 's/units: 4, init/units: 5, init/' good.yaml > wrong_classes.yaml
expect_exit 2 'wrong_classes.yaml:11:7: model.layers\[4\] \(dense_4\): the last layer must output 4 logits' -- \
  "$STRATA" run wrong_classes.yaml

expect_exit 2 'nope.yaml: cannot read config file' -- "$STRATA" run nope.yaml

cat > missing_data.yaml <<YAML
data: {source: hdf5, path: $work/absent.h5}
model: {layers: [flatten, {dense: {units: 10}}]}
output: {dir: out_missing}
YAML
expect_exit 3 'absent.h5: file not found' -- "$STRATA" run missing_data.yaml

# A real file cut in half, as a job killed while copying it would leave it.
"$STRATA" data import-idx /usr/share/datasets/fashion-mnist full.h5 >/dev/null
head -c $(( $(stat -c %s full.h5) / 2 )) full.h5 > truncated.h5
sed "s|absent.h5|truncated.h5|; s|out_missing|out_truncated|" missing_data.yaml > truncated.yaml
expect_exit 3 'truncated.h5: .*(truncated|damaged)' -- "$STRATA" run truncated.yaml

mkdir broken_idx && printf 'not gzip at all' > broken_idx/train-images-idx3-ubyte.gz
expect_exit 3 'train-images-idx3-ubyte.gz' -- "$STRATA" data import-idx broken_idx x.h5

expect_exit 2 'config' -- "$STRATA" run
expect_exit 2 'subcommand is required' -- "$STRATA" --no-such-flag
# A Slurm step launched without MPI (srun --mpi=none): every task would train alone.
write_synthetic_config "$work/slurm_out" > slurm.yaml
SLURM_JOB_ID=7 SLURM_NTASKS=4 SLURM_PROCID=2 expect_exit 2 'Slurm started 4 tasks \(SLURM_NTASKS\) but MPI sees a world of 1 rank.*srun --mpi=pmi2' -- "$STRATA" run slurm.yaml
# A bad checkpoint section.
write_synthetic_config "$work/ck_out" > ck.yaml
printf 'checkpoint: {keep: 1}\n' >> ck.yaml
expect_exit 2 'ck.yaml:[0-9]+:[0-9]+: checkpoint.keep: keep at least 2 checkpoints' -- "$STRATA" run ck.yaml
write_synthetic_config "$work/ck_out" > ck2.yaml
printf 'checkpoint: {signal: KILL}\n' >> ck2.yaml
expect_exit 2 "ck2.yaml:[0-9]+:[0-9]+: checkpoint.signal: unknown signal 'KILL' \(known: USR1, USR2, TERM, INT, HUP\)" -- "$STRATA" run ck2.yaml
# Configs are UTF-8: a Latin-1 byte is an error at its line and column, before any directory is made.
printf 'run: {name: caf\xe9}\ndata: {source: synthetic}\nmodel: {layers: [flatten, {dense: {units: 10}}]}\noutput: {dir: latin_out}\n' > latin1.yaml
expect_exit 2 'latin1.yaml:1:16: byte 0xE9 is not UTF-8' -- "$STRATA" run latin1.yaml
[ ! -e latin_out ] || { echo "FAIL: a Latin-1 config created its output directory"; fails=$((fails + 1)); }
# Integers beyond int say the limit.
write_synthetic_config "$work/big_out" | sed 's/epochs: [0-9]*/epochs: 1000000000000/' > big.yaml
expect_exit 2 'big.yaml:[0-9]+:[0-9]+: training.epochs: expected a positive integer, got 1000000000000, above the largest allowed, 2147483647' -- \
  "$STRATA" run big.yaml
# Output directory problems say what is wrong, at output.dir's line: a parent that is a file, a
# directory the user may not write (checked as an unprivileged user: root writes anywhere).
write_synthetic_config "plain_file/out" > under_file.yaml
touch plain_file
expect_exit 2 'under_file.yaml:[0-9]+:[0-9]+: output.dir: cannot create output directory plain_file/out: .*plain_file is a file, not a directory' -- \
  "$STRATA" run under_file.yaml
# (Only where an unprivileged user can run the binary: a checkout under a private home cannot.)
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && runuser -u nobody -- "$STRATA" --version >/dev/null 2>&1; then
  mkdir -p locked && chmod 755 locked "$work" && chmod 644 under_file.yaml
  write_synthetic_config "locked/out" > locked.yaml && chmod 644 locked.yaml
  expect_exit 2 'locked.yaml:[0-9]+:[0-9]+: output.dir: cannot create output directory locked/out: no permission to create entries in .*locked \(Permission denied\)' -- \
    runuser -u nobody -- "$STRATA" run locked.yaml
  expect_exit 2 '^strata: config error: --set output.dir=locked: output.dir: output directory locked is not writable: Permission denied' -- \
    runuser -u nobody -- "$STRATA" run locked.yaml --set output.dir=locked
else
  echo "skip: the permission checks need root and a binary that user nobody can run"
fi
# Mistakes that once passed `strata plan` or named no cause: each is refused with its place.
printf 'run: {name: tabs}\nmodel:\n\tlayers: [flatten]\n' > tabs.yaml
expect_exit 2 'tabs.yaml:[0-9]+:[0-9]+: malformed YAML: .* \(line 3 indents with a tab: YAML indents with spaces only\)' -- \
  "$STRATA" plan tabs.yaml --ranks 1
sed 's|source: synthetic|source: hdf5\n  path: full.h5\n  read: shards\n  classes: [0, 1]|' good.yaml > shard_classes.yaml
expect_exit 2 'shard_classes.yaml:6:12: data.classes: selects samples in memory, and read: shards reads each step.s samples from the file: set data.read: memory' -- \
  "$STRATA" plan shard_classes.yaml --ranks 1
sed 's|source: synthetic|source: hdf5\n  path: full.h5\n  classes: []|' good.yaml > no_classes.yaml
expect_exit 2 'no_classes.yaml:5:12: data.classes: expected a non-empty list of class labels, got an empty list' -- \
  "$STRATA" plan no_classes.yaml --ranks 1
sed 's|source: synthetic|source: hdf5\n  path: full.h5\n  classes: [0, 12]|' good.yaml > far_class.yaml
expect_exit 2 'far_class.yaml: data.classes: class 12 is not one of the data.s 10 classes \(0 to 9\)' -- \
  "$STRATA" plan far_class.yaml --ranks 1
sed 's/^output:/parallel: {accumulate: Auto}\noutput:/' good.yaml > accumulate.yaml
expect_exit 2 'accumulate.yaml:[0-9]+:[0-9]+: parallel.accumulate: expected an integer.*, or auto \(the planner chooses K\)' -- \
  "$STRATA" plan accumulate.yaml --ranks 1
cat > objective_train.yaml <<YAML
model: {objective: sphere, dims: 3}
YAML
expect_exit 2 'objective_train.yaml: model.objective: a function objective replaces training: the stages must be one hpo stage' -- \
  "$STRATA" plan objective_train.yaml --ranks 2
sed 's/units: 4, init: glorot/units: $u, init: glorot/' good.yaml > in_stages.yaml
printf 'stages: [{hpo: {algorithm: genetic, population: $u, generations: 2, space: {u: {int: [4, 8]}}}}]\n' >> in_stages.yaml
expect_exit 2 'in_stages.yaml:[0-9]+:[0-9]+: stages\[0\].hpo.population: .\$u.: a search parameter takes a new value in every trial, so it may stand anywhere but in stages' -- \
  "$STRATA" plan in_stages.yaml --ranks 1
# A planner error after --set names the override, not only the file's line.
sed 's/^output:/parallel: {max_global_batch: 64}\noutput:/' good.yaml > bound.yaml
expect_exit 2 'bound.yaml:[0-9]+:[0-9]+: parallel.data: .* \(with --set parallel.data=3\)' -- \
  "$STRATA" plan bound.yaml --ranks 3 --set parallel.data=3
expect_exit 2 'network.*not in \{aries,slingshot,local\}' -- \
  "$STRATA" plan bound.yaml --ranks 2 --predict --network gemini

# Relative data paths are read from the config's directory, whatever the working directory.
mkdir -p project/configs project/data && cp "$work/full.h5" project/data/fm.h5
cat > project/configs/rel.yaml <<YAML
data: {path: ../data/fm.h5, train_subset: 256, test_subset: 128}
model: {layers: [flatten, {dense: {units: 10}}]}
training: {epochs: 1}
output: {dir: rel_out}
YAML
expect_exit 0 'done' -- bash -c "cd / && '$STRATA' run '$work/project/configs/rel.yaml' --set output.dir='$work/rel_out'"
# A Keras-style file (x_train/y_train, float32 images in [0, 1], int64 labels, no num_classes)
# trains through data.images/data.labels to the same accuracy as the uint8 file it came from.
"$PYTHON3" - "$work/full.h5" "$work/keras.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    for split in ("train", "test"):
        dst[f"x_{split}"] = src[f"/{split}/images"][:3000].astype(np.float32) / 255.0
        dst[f"y_{split}"] = src[f"/{split}/labels"][:3000].astype(np.int64)
PY
for kind in bytes reals; do
  cat > $kind.yaml <<YAML
run: {seed: 5, threads: 1}
data: {path: full.h5, train_subset: 3000, test_subset: 1000}
model: {layers: [flatten, {dense: {units: 10}}]}
training: {epochs: 1, local_batch: 50, optimizer: {type: sgd, lr: 0.1}}
output: {dir: out_$kind}
YAML
done
sed -i 's|path: full.h5,|path: keras.h5, images: "x_{split}", labels: "y_{split}",|' reals.yaml
expect_exit 0 'done' -- "$STRATA" run bytes.yaml
expect_exit 0 'done' -- "$STRATA" run reals.yaml
"$PYTHON3" - out_bytes/metrics.jsonl out_reals/metrics.jsonl <<'PY' || fails=$((fails + 1))
import json, sys
a, b = (json.loads(open(p).readline()) for p in sys.argv[1:])
ok = abs(a["test_accuracy"] - b["test_accuracy"]) <= 0.002 and a["test_accuracy"] > 0.6
print(("ok" if ok else "FAIL") + f": float32 x_train/y_train test acc {b['test_accuracy']:.4f}, uint8 {a['test_accuracy']:.4f}")
sys.exit(0 if ok else 1)
PY
finish
