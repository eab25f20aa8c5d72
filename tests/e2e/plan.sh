#!/usr/bin/env bash
# `strata plan` prints the decomposition without starting ranks, and rejects an impossible one with exit 2.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
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
finish
