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
finish
