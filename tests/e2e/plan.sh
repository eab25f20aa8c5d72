#!/usr/bin/env bash
# `strata plan` prints the decomposition without starting ranks, and rejects an impossible one with exit 2.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
root="$PWD"
cd "$work"
write_synthetic_config out | sed 's/^output:/parallel: {max_global_batch: 64}\noutput:/' > plan.yaml
expect_exit 0 '8 ranks = G 4 member groups x D 2 data replicas x M 1 model shards; global batch 64' -- \
  "$STRATA" plan plan.yaml --ranks 8
expect_exit 0 'group 3: ranks 6-7 on node 3' -- "$STRATA" plan plan.yaml --ranks 8 --ranks-per-node 2
STRATA_RANKS_PER_NODE=4 expect_exit 0 'group 3: ranks 6-7 on node 1' -- "$STRATA" plan plan.yaml --ranks 8
sed 's/max_global_batch: 64/max_global_batch: 64, model: 3/' plan.yaml > bad_model.yaml
expect_exit 2 'bad_model.yaml:[0-9]+:[0-9]+: parallel.model: 8 ranks cannot be split into model groups of 3 shards' -- \
  "$STRATA" plan bad_model.yaml --ranks 8
expect_exit 2 'ranks' -- "$STRATA" plan plan.yaml --ranks 0
# An impossible request suggests the rank counts that would work.
sed 's/max_global_batch: 64/max_global_batch: 64, data: 2/' plan.yaml > fixed_data.yaml
for n in 3 5 7; do
  expect_exit 2 "fixed_data.yaml:[0-9]+:[0-9]+: parallel.data: $n ranks cannot be split into groups of D x M = 2 x 1 = 2 ranks; the nearest rank counts that work are $((n - 1)) and $((n + 1))" -- \
    "$STRATA" plan fixed_data.yaml --ranks $n
done
# Extra ranks on a train stage become independent copies, and plan says so; layout: data gives them
# to one training instead, up to the bound.
expect_exit 0 'note: stage train: 4 member groups train 4 independent copies of this config' -- \
  "$STRATA" plan plan.yaml --ranks 8
sed 's/max_global_batch: 64/max_global_batch: 64, layout: data/' plan.yaml > one_group.yaml
expect_exit 0 '2 ranks = G 1 member groups x D 2 data replicas' -- "$STRATA" plan one_group.yaml --ranks 2
expect_exit 2 'one_group.yaml:[0-9]+:[0-9]+: parallel.layout: data puts every rank into one training: D = 8 ranks / M = 1 = 8 replicas x 32 samples per step = global batch 256, above parallel.max_global_batch 64 \(or raise max_global_batch, or use layout: members for more trainings\); the nearest rank count that works is 2' -- \
  "$STRATA" plan one_group.yaml --ranks 8
if "$STRATA" plan one_group.yaml --ranks 2 | grep -q 'independent copies'; then
  echo "FAIL: layout: data still notes independent copies"; fails=$((fails + 1))
fi
# A population of 10 on 2048 ranks: 2038 groups would idle, and plan says so.
cat > small_search.yaml <<YAML
run: {name: rastrigin, seed: 3}
model: {objective: rastrigin, dims: 4}
stages: [{hpo: {algorithm: genetic, population: 10, generations: 3}}]
YAML
expect_exit 0 'note: stage hpo runs at most 10 training\(s\) at once, so 2038 of the G = 2048 member groups will be idle; 10 ranks \(G = 10\) would do the same work' -- \
  "$STRATA" plan small_search.yaml --ranks 2048
# A searched width: M is chosen so that the largest model a trial can build fits memory_per_rank_mib
# (at units 100000, 6.9 M parameters x 12 bytes = 79 MiB; at the first value, 4 units, a few KiB).
cat > searched.yaml <<YAML
data: {source: synthetic, synthetic: {train: 1200, test: 300, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: \$u, split: column}}, relu, {dense: {units: 4, split: row}}]}
training: {local_batch: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
parallel: {memory_per_rank_mib: 50}
stages: [{hpo: {algorithm: genetic, population: 4, generations: 2, space: {u: {int: [4, 100000]}}}}]
YAML
expect_exit 0 'M = 2: the smallest divisor of 4 ranks at which a shard \(39.5 MiB = 0.0 MiB unsplit \+ 79.0 MiB split / M\) fits 50.0 MiB per rank \(checkpoints too: each shard writes its own slices\)' -- \
  "$STRATA" plan searched.yaml --ranks 4
expect_exit 0 'models of search trials, at most: 6900004 parameters' -- "$STRATA" plan searched.yaml --ranks 4
# Where the ranks would train: a GPU per rank where there is one; a split model's M = 2 shards only
# where each has one.
expect_exit 0 'device: run.device auto: forward and backward on one GPU per rank where a node has them, else the CPU; the model.s M = 2 shards each need a GPU of their own, else all train on the CPU; this node: ' -- "$STRATA" plan searched.yaml --ranks 4
expect_exit 0 'device: run.device auto: forward and backward on one GPU per rank where a node has them, else the CPU; this node: ' -- "$STRATA" plan one_group.yaml --ranks 2
# Two searched parameters: the plan bounds the models over probes of both (kernel 1 and 100000
# units: 26.1 M parameters, 298.7 MiB, so M = 8 on 8 ranks); kernel 9 cannot be built on 8x8 images
# and is left out of the bound (that trial fails alone when the search reaches it).
cat > two_searched.yaml <<YAML
data: {source: synthetic, synthetic: {train: 1200, test: 300, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [{conv2d: {filters: 4, kernel: \$k}}, relu, flatten, {dense: {units: \$u, split: column}}, relu, {dense: {units: 4, split: row}}]}
training: {local_batch: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
parallel: {memory_per_rank_mib: 50}
stages: [{hpo: {algorithm: genetic, population: 4, generations: 2, space: {k: {int: [1, 9]}, u: {int: [4, 100000]}}}}]
YAML
expect_exit 0 'M = 8: the smallest divisor of 8 ranks at which a shard \(37.3 MiB' -- "$STRATA" plan two_searched.yaml --ranks 8
expect_exit 0 'models of search trials, at most: 26100012 parameters, 298.7 MiB' -- "$STRATA" plan two_searched.yaml --ranks 8
# Unmarked layers stay whole on every shard, so no M makes them fit.
sed 's/, split: column//; s/, split: row//' searched.yaml > unsplit.yaml
expect_exit 2 'unsplit.yaml:[0-9]+:[0-9]+: parallel.memory_per_rank_mib: the model needs 79.0 MiB, which does not fit 50.0 MiB per rank even split 4 ways: 79.0 MiB of it is in layers not marked `split`' -- \
  "$STRATA" plan unsplit.yaml --ranks 4
# strata sbatch: a job script planned for nodes x ranks per node, requeued on exit 75.
expect_exit 0 '#SBATCH --ntasks-per-node=2' -- "$STRATA" sbatch plan.yaml --nodes 4 --ranks-per-node 2 --time 1:00:00
"$STRATA" sbatch plan.yaml --nodes 4 --ranks-per-node 2 --time 1:00:00 --partition batch > job.sh
for line in '#SBATCH --nodes=4' '#SBATCH --time=1:00:00' '#SBATCH --partition=batch' '#SBATCH --requeue' \
            '#SBATCH --open-mode=append' '#SBATCH --signal=B:USR1@300' "#SBATCH --chdir=$work" \
            '# 8 ranks = G 4 member groups x D 2 data replicas' "jobs/slurm/strata_step.sh run $work/plan.yaml"; do
  grep -qF -- "$line" job.sh || { echo "FAIL: the sbatch script lacks '$line'"; fails=$((fails + 1)); }
done
bash -n job.sh || { echo "FAIL: the sbatch script is not valid bash"; fails=$((fails + 1)); }
sed 's/^output:/checkpoint: {signal: USR2}\noutput:/' plan.yaml > usr2.yaml
expect_exit 0 '#SBATCH --signal=B:USR2@600' -- "$STRATA" sbatch usr2.yaml --nodes 1 --signal-margin 600
expect_exit 2 'parallel.model: 3 ranks cannot be split into model groups of 3 shards|8 ranks cannot' -- \
  "$STRATA" sbatch bad_model.yaml --nodes 4 --ranks-per-node 2
# A stage with its own parallel block gets its own plan; data.classes sizes the model's output.
cat > stages.yaml <<YAML
data: {source: synthetic, synthetic: {classes: 4}, classes: [0, 1, 2]}
model: {layers: [flatten, {dense: {units: 16}}, relu, {dense: {units: 3}}]}
training: {local_batch: 16}
parallel: {max_global_batch: 16}
stages:
  - train
  - ensemble: {seeds: 2, parallel: {max_global_batch: 32}}
YAML
expect_exit 0 'stage 2 \(ensemble\) with its own parallel block' -- "$STRATA" plan stages.yaml --ranks 4
"$STRATA" plan stages.yaml --ranks 4 > stages.txt
# The shipped combined config plans, and its job script is valid bash.
expect_exit 0 'models of search trials, at most' -- bash -c "cd '$root' && '$STRATA' plan configs/combined.yaml --ranks 8"
bash -n "$root/jobs/slurm/combined.sbatch" || { echo "FAIL: combined.sbatch is not valid bash"; fails=$((fails + 1)); }
grep -q 'G = 4: 4 ranks' stages.txt && grep -q 'G = 2: 4 ranks / (D x M = 2)' stages.txt ||
  { echo "FAIL: the stage plans are not G 4 x D 1 and G 2 x D 2"; cat stages.txt; fails=$((fails + 1)); }
# The tools need no MPI: they run where MPI_Init fails (on a login node outside a job step; here a
# PMI server that is not there), and started by a launcher on several ranks they refuse.
PMI_PORT=127.0.0.1:1 expect_exit 0 '8 ranks = G 4 member groups' -- "$STRATA" plan plan.yaml --ranks 8
PMI_PORT=127.0.0.1:1 expect_exit 0 '^#SBATCH --nodes=2' -- "$STRATA" sbatch plan.yaml --nodes 2 --ranks-per-node 4
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
expect_exit 2 'strata sbatch runs on one rank, but was started on 2; start it without mpiexec' -- \
  "$MPIEXEC" -n 2 "$STRATA" sbatch plan.yaml --nodes 2
finish
