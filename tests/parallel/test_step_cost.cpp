// The cost model on hand-computed cases: each collective's formula, a step's compute, M's split,
// the communication of a plan, and the calibration file's round trip.
#include <catch2/catch.hpp>

#include "core/errors.hpp"
#include "parallel/calibration_json.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/step_cost.hpp"

using namespace strata;

namespace {

const LinkCost slow{1e-3, 1e6};  // 1 ms, 1 MB/s: easy sums

// conv (no split) -> dense column (gathers) -> dense row... kept simple: a two-layer MLP whose
// first dense is column-split, feeding a row-split second one.
Calibration mlp() {
  Calibration c;
  c.config = "mlp.yaml";
  c.cpu = "test CPU";
  c.cores = 4;
  c.local_batch = 10;
  c.bucket_mib = 25.0;
  c.layers = {
      LayerTiming{"flatten_0", "flatten", SplitKind::none, false, false, {}, 8, 8, 0.0, 0.0},
      LayerTiming{"dense_1",
                  "dense/column",
                  SplitKind::column,
                  false,
                  false,
                  {4 * 8, 4},
                  8,
                  4,
                  0.010,
                  0.020},
      LayerTiming{"relu_2", "relu", SplitKind::none, false, true, {}, 4, 4, 0.001, 0.001},
      LayerTiming{
          "dense_3", "dense/row", SplitKind::row, false, true, {2 * 4, 2}, 4, 2, 0.004, 0.008},
  };
  c.data_s = 0.002;
  c.optimizer_s = 0.006;
  c.steps = {StepTiming{1, 0.060, {}}, StepTiming{2, 0.040, {}}, StepTiming{4, 0.025, {}}};
  return c;
}

Plan plan(int groups, int data, int model, int per_node, int local_batch = 10, int accumulate = 1) {
  Plan p;
  p.groups = groups;
  p.data = data;
  p.model = model;
  p.world_size = groups * data * model;
  p.ranks_per_node = per_node;
  p.local_batch = local_batch;
  p.max_global_batch = data * local_batch * accumulate;
  p.accumulate = accumulate;
  return p;
}

PredictionSettings settings(int cores) {
  PredictionSettings s;
  s.network = NetworkCost{"test", LinkCost{1e-6, 1e9}, slow};
  s.cores_per_node = cores;
  return s;
}

// --network local on the node `c` was calibrated on: its measured link inside the node.
PredictionSettings on_calibrated_node(const Calibration& c, int cores) {
  PredictionSettings s = settings(cores);
  s.network.intra_node = *c.intra_node;
  s.calibrated_node = true;
  return s;
}

}  // namespace

TEST_CASE("collective costs follow their alpha-beta formulas", "[cost]") {
  // 2 log2(p) latencies and 2(p-1)/p of the buffer: p = 4, 1 MB: 4 ms + 1.5 s.
  CHECK(allreduce_seconds(1e6, 4, slow) == Approx(4e-3 + 1.5));
  CHECK(allreduce_seconds(1e6, 3, slow) == Approx(4e-3 + 2.0 / 3.0 * 2.0));  // log2 3 rounds up
  CHECK(allreduce_seconds(1e6, 1, slow) == 0.0);
  // A ring allgather of a 1 MB result: (p-1) latencies and (p-1)/p of it.
  CHECK(allgather_seconds(1e6, 4, slow) == Approx(3e-3 + 0.75));
  // Hierarchical, 4 ranks per node on 8 nodes: intra reduce-scatter and allgather, then the whole
  // buffer through each NIC.
  const NetworkCost net{"n", LinkCost{1e-6, 1e9}, slow};
  const double inside = 2.0 * (3 * 1e-6 + 0.75 * 1e6 / 1e9);
  CHECK(hierarchical_allreduce_seconds(1e6, 4, 8, net) ==
        Approx(inside + 6e-3 + 2.0 * 7.0 / 8.0 * 1.0));
  CHECK(hierarchical_allreduce_seconds(1e6, 1, 8, net) == Approx(allreduce_seconds(1e6, 8, slow)));
}

TEST_CASE("network presets are named and unknown ones refused", "[cost]") {
  const NetworkCost aries = network_preset("aries");
  CHECK(aries.inter_node.latency_s > 0.0);
  CHECK(network_preset("slingshot").inter_node.bytes_per_s > aries.inter_node.bytes_per_s);
  CHECK_THROWS_AS(network_preset("ethernet"), ConfigError);
}

TEST_CASE("one rank's step is the calibrated step at its threads", "[cost]") {
  const Calibration c = mlp();
  // One rank on a 4-core node takes 4 threads: the 4-thread step, no communication.
  StepCost one = predict_step(c, plan(1, 1, 1, 1), settings(4));
  CHECK(one.threads == 4);
  CHECK(one.compute_s == Approx(0.025));
  CHECK(one.step_s == Approx(0.025));
  CHECK(one.samples_per_s == Approx(10 / 0.025));
  // 4 ranks of independent members on that node: a thread each, four trainings.
  const StepCost four = predict_step(c, plan(4, 1, 1, 4), settings(4));
  CHECK(four.threads == 1);
  CHECK(four.step_s == Approx(0.060));
  CHECK(four.total_samples_per_s == Approx(4 * 10 / 0.060));
  // 8 such ranks on 4 cores share them: twice as slow.
  const StepCost over = predict_step(c, plan(8, 1, 1, 8), settings(4));
  CHECK(over.oversubscription == Approx(2.0));
  CHECK(over.step_s == Approx(0.120));
  // 3 threads were not measured: the 2-thread speedup, scaled ideally to 3.
  PredictionSettings three = settings(4);
  three.threads = 3;
  CHECK(predict_step(c, plan(1, 1, 1, 1), three).compute_s == Approx(0.060 / (1.5 * 1.5)));
}

TEST_CASE("accumulation repeats the micro-batches, not the optimizer", "[cost]") {
  const StepCost k3 = predict_step(mlp(), plan(4, 1, 1, 4, 10, 3), settings(4));
  CHECK(k3.compute_s == Approx(3 * (0.060 - 0.006) + 0.006));
  CHECK(k3.samples_per_s == Approx(30 / k3.step_s));
}

TEST_CASE("model parallelism splits the split layers and pays for their activations", "[cost]") {
  const Calibration c = mlp();
  const StepCost m2 = predict_step(c, plan(2, 1, 2, 4), settings(4));
  CHECK(m2.threads == 1);
  // The split layers' half is gone, and the optimizer's share of their parameters: dense_1 holds
  // 36 of 46 parameters, all split; dense_3 splits its 8 weights and keeps its 2 biases whole.
  const double split_gone = (0.030 + 0.012) * 0.5;
  const double optimizer_gone = 0.006 * (18.0 + 4.0) / 46.0;
  CHECK(m2.compute_s == Approx(0.060 - split_gone - optimizer_gone));
  // dense_1 feeds a row split (no gather, and as the first layer that learns no input gradient);
  // dense_3 sums its [10 x 2] output over the 2 shards on the intra-node link.
  CHECK(m2.model_parallel_s == Approx(allreduce_seconds(10 * 2 * 4.0, 2, LinkCost{1e-6, 1e9})));
  CHECK(m2.data_parallel_s == 0.0);
  // Shards on two nodes pay the slow link.
  const StepCost apart = predict_step(c, plan(1, 1, 2, 1), settings(4));
  CHECK(apart.model_parallel_s == Approx(allreduce_seconds(80.0, 2, slow)));
}

TEST_CASE("a step measured split over 2 ranks replaces the model's guess at M = 2", "[cost]") {
  Calibration c = mlp();
  c.intra_node = LinkCost{1e-6, 1e9};
  c.split_step_s = 0.050;
  c.split_optimizer_s = 0.004;
  PredictionSettings s = settings(4);
  s.network.intra_node = *c.intra_node;
  const double optimizer_m2 = 0.006 * (1.0 - 22.0 / 46.0);
  // On the calibrated node the prediction is the measured step, its optimizer part rescaled.
  const StepCost m2 = predict_step(c, plan(2, 1, 2, 4), s);
  CHECK(m2.step_s == Approx(0.050 - 0.004 + optimizer_m2));
  // M = 4 moves the split layers' compute share from 1/2 to 1/4 and pays the collectives over 4.
  const StepCost m4 = predict_step(c, plan(1, 1, 4, 4), s);
  // dense_3's row split sums [10 x 2] floats; dense_1 neither gathers nor needs an input gradient.
  const double mp2 = allreduce_seconds(80.0, 2, *c.intra_node);
  CHECK(m4.compute_s ==
        Approx(0.050 - 0.004 - mp2 + 0.042 * (0.25 - 0.5) + 0.006 * (1.0 - (27.0 + 6.0) / 46.0)));
  CHECK(m4.model_parallel_s == Approx(allreduce_seconds(80.0, 4, *c.intra_node)));
}

TEST_CASE("a split step shorter than its measured collectives falls back to the layer times",
          "[cost]") {
  // A calibration on a busy node: 100 ms MPI latency, longer than the 50 ms split step.
  Calibration c = mlp();
  c.intra_node = LinkCost{0.1, 1e9};
  c.split_step_s = 0.050;
  c.split_optimizer_s = 0.004;
  PredictionSettings s = settings(4);
  const double optimizer_m2 = 0.006 * (1.0 - 22.0 / 46.0);
  const StepCost m2 = predict_step(c, plan(2, 1, 2, 4), s);
  // The unsplit micro-batch (0.060 - 0.006) less half the split layers' 0.042, as without a
  // measured split step: never the negative 0.050 - 0.004 - (allreduce at 100 ms).
  CHECK(m2.compute_s == Approx(0.054 - 0.042 * 0.5 + optimizer_m2));
  CHECK(m2.compute_s > 0.0);
}

TEST_CASE("data parallelism pays an allreduce per bucket and one for the step's sums", "[cost]") {
  const Calibration c = mlp();
  // D = 2 on one node: one bucket of all 46 gradients (all small) and 16 bytes of sums.
  const LinkCost intra{1e-6, 1e9};
  const StepCost d2 = predict_step(c, plan(1, 2, 1, 2), settings(4));
  CHECK(d2.threads == 2);
  CHECK(d2.data_parallel_s ==
        Approx(allreduce_seconds(46 * 4.0, 2, intra) + allreduce_seconds(16.0, 2, intra)));
  // D = 4 over 4 nodes: the slow link; hierarchical is the same with one rank per node.
  const StepCost d4 = predict_step(c, plan(1, 4, 1, 1), settings(4));
  CHECK(d4.data_parallel_s ==
        Approx(allreduce_seconds(184.0, 4, slow) + allreduce_seconds(16.0, 4, slow)));
  // D = 4, two per node, flat: both ranks of a node cross its link at once, at half its rate.
  const LinkCost shared{1e-3, 0.5e6};
  CHECK(predict_step(c, plan(1, 4, 1, 2), settings(4)).data_parallel_s ==
        Approx(allreduce_seconds(184.0, 4, shared) + allreduce_seconds(16.0, 4, shared)));
  // Hierarchical: one sum of all gradients per step (no buckets) through the window and the nodes'
  // allreduce, whose slices share the link already; the step's sums go over MPI.
  PredictionSettings h = settings(4);
  h.allreduce = AllreduceKind::hierarchical;
  const NetworkCost& net = h.network;
  CHECK(
      predict_step(c, plan(1, 4, 1, 2), h).data_parallel_s ==
      Approx(hierarchical_allreduce_seconds(184.0, 2, 2, net) + allreduce_seconds(16.0, 4, slow)));
  // On one node hierarchical is the window's two phases alone.
  CHECK(predict_step(c, plan(1, 2, 1, 2), h).data_parallel_s ==
        Approx(hierarchical_allreduce_seconds(184.0, 2, 1, net) +
               allreduce_seconds(16.0, 2, net.intra_node)));
  // auto: the window wherever every node holds the same number of replicas, at least 2; MPI
  // with one per node, or with 3 replicas on nodes of 2.
  PredictionSettings automatic = settings(4);
  automatic.allreduce = AllreduceKind::automatic;
  CHECK(predict_step(c, plan(1, 4, 1, 2), automatic).data_parallel_s ==
        Approx(predict_step(c, plan(1, 4, 1, 2), h).data_parallel_s));
  CHECK(predict_step(c, plan(1, 4, 1, 1), automatic).data_parallel_s == Approx(d4.data_parallel_s));
  CHECK(predict_step(c, plan(1, 3, 1, 2), automatic).data_parallel_s ==
        Approx(predict_step(c, plan(1, 3, 1, 2), settings(4)).data_parallel_s));
  CHECK(sums_through_window(AllreduceKind::automatic, 2, 2));
  CHECK_FALSE(sums_through_window(AllreduceKind::automatic, 1, 2));
  CHECK_FALSE(sums_through_window(AllreduceKind::automatic, 1, 1));
  CHECK(sums_through_window(AllreduceKind::hierarchical, 1, 1));
  CHECK_FALSE(sums_through_window(AllreduceKind::mpi, 4, 4));
  // Without bucketing every tensor is its own allreduce.
  Calibration per_tensor = c;
  per_tensor.bucket_mib = 0.0;
  const StepCost each = predict_step(per_tensor, plan(1, 2, 1, 2), settings(4));
  CHECK(each.data_parallel_s ==
        Approx(allreduce_seconds(8.0, 2, intra) + allreduce_seconds(32.0, 2, intra) +
               allreduce_seconds(128.0, 2, intra) + allreduce_seconds(16.0, 2, intra) +
               allreduce_seconds(16.0, 2, intra)));
}

TEST_CASE("ranks measured sharing the node replace the division of its cores", "[cost]") {
  Calibration c = mlp();  // one thread: 0.060 s a step
  c.intra_node = LinkCost{1e-4, 5e8};
  c.intra_node_ranks = 8;
  c.shared_steps = {StepTiming{1, 0.150, {}}};
  const PredictionSettings local = on_calibrated_node(c, 4);
  // 8 ranks of members on 4 cores: the step measured with 8 stepping (2.5x alone), not 2x.
  const StepCost over = predict_step(c, plan(8, 1, 1, 8), local);
  CHECK(over.oversubscription == Approx(2.0));
  CHECK(over.slowdown_measured);
  CHECK(over.compute_slowdown == Approx(2.5));
  CHECK(over.compute_s == Approx(0.150));
  // Replicas of 4 ranks, 8 on the node: the same step, and the calibrated link for the sums (one
  // bucket of all 46 gradients, and the step's sums).
  const StepCost data = predict_step(c, plan(2, 4, 1, 8), local);
  CHECK(data.compute_s == Approx(0.150));
  CHECK(data.data_parallel_s == Approx(allreduce_seconds(184.0, 4, *c.intra_node) +
                                       allreduce_seconds(16.0, 4, *c.intra_node)));
  // 4 ranks on the node were not measured: the division of the cores.
  CHECK(predict_step(c, plan(4, 1, 1, 4), local).compute_s == Approx(0.060));
  // A node of other cores than the calibrated one: the measurement does not apply.
  PredictionSettings other_node = local;
  other_node.cores_per_node = 2;
  const StepCost elsewhere = predict_step(c, plan(8, 1, 1, 8), other_node);
  CHECK_FALSE(elsewhere.slowdown_measured);
  CHECK(elsewhere.compute_s == Approx(0.240));
  // A preset network is not this node: the measurement does not apply.
  CHECK(predict_step(c, plan(8, 1, 1, 8), settings(4)).compute_s == Approx(0.120));
  // The measured steps are one-thread ones: 8 ranks of 2 threads on 16 cores do not use it.
  PredictionSettings wide = local;
  wide.cores_per_node = 16;
  CHECK(predict_step(c, plan(8, 1, 1, 8), wide).compute_s == Approx(0.040));
}

TEST_CASE("ranks measured sharing the node on their share of its cores", "[cost]") {
  // 2 ranks calibrated on 4 cores: alone, 2 threads step in 0.040 s; with both ranks stepping on 2
  // threads each, 0.050 s (1.25x: the caches and memory they share).
  Calibration c = mlp();
  c.intra_node = LinkCost{1e-4, 5e8};
  c.intra_node_ranks = 2;
  c.shared_steps = {StepTiming{1, 0.066, {}}, StepTiming{2, 0.050, {}}};
  const PredictionSettings local = on_calibrated_node(c, 4);
  const StepCost members = predict_step(c, plan(2, 1, 1, 2), local);
  CHECK(members.threads == 2);
  CHECK(members.slowdown_measured);
  CHECK(members.compute_slowdown == Approx(0.050 / 0.040));
  CHECK(members.compute_s == Approx(0.050));
  CHECK(members.measured_as == "members");
  // run.threads 1 on the same node: the one-thread shared step (1.1x).
  PredictionSettings one = local;
  one.threads = 1;
  CHECK(predict_step(c, plan(2, 1, 1, 2), one).compute_slowdown == Approx(1.1));
  // 3 threads each was not measured shared: no slowdown (2 x 3 > 4 cores: the oversubscription).
  PredictionSettings three = local;
  three.threads = 3;
  const StepCost guessed = predict_step(c, plan(2, 1, 1, 2), three);
  CHECK_FALSE(guessed.slowdown_measured);
  CHECK(guessed.compute_slowdown == Approx(1.5));
  // Pairs of replicas (D = 2) measured at once on 2 threads each, their gradient sums included
  // (0.056 s): that step, with no allreduce added on top; D = 1 members keep their own measurement.
  c.replica_pairs_step = StepTiming{2, 0.056, {}};
  const StepCost replicas = predict_step(c, plan(1, 2, 1, 2), local);
  CHECK(replicas.slowdown_measured);
  CHECK(replicas.compute_slowdown == Approx(0.056 / 0.040));
  CHECK(replicas.data_parallel_s == 0.0);
  CHECK(replicas.measured_as == "replica pairs");
  CHECK(replicas.step_s == Approx(0.056));
  CHECK(predict_step(c, plan(2, 1, 1, 2), local).compute_slowdown == Approx(0.050 / 0.040));
  // With 2 micro-batches a step the pairs' sums, measured once per micro-batch, would count twice:
  // the members' slowdown and the modelled sums instead.
  const StepCost accumulating = predict_step(c, plan(1, 2, 1, 2, 10, 2), local);
  CHECK(accumulating.measured_as == "members");
  CHECK(accumulating.compute_slowdown == Approx(0.050 / 0.040));
  CHECK(accumulating.data_parallel_s > 0.0);
  // Replicas on one thread were not measured in pairs: the members' one-thread slowdown, and the
  // modelled sums.
  const StepCost one_thread_replicas = predict_step(c, plan(1, 2, 1, 2), one);
  CHECK(one_thread_replicas.compute_slowdown == Approx(1.1));
  CHECK(one_thread_replicas.data_parallel_s > 0.0);
  // A thread count between those measured alone scales ideally from the one below it.
  CHECK(c.step_alone_s(3) == Approx(0.040 * 2.0 / 3.0));
  CHECK(c.step_alone_s(4) == Approx(0.025));
}

TEST_CASE("pairs of ranks measured stepping split at once slow the split step", "[cost]") {
  // 4 ranks calibrated: one pair alone steps split in 0.050 s, two pairs at once in 0.065 s.
  Calibration c = mlp();
  c.intra_node = LinkCost{1e-6, 1e9};
  c.intra_node_ranks = 4;
  c.split_step_s = 0.050;
  c.split_optimizer_s = 0.004;
  c.shared_split_step_s = 0.065;
  c.shared_steps = {StepTiming{1, 0.090, {}}};
  const PredictionSettings local = on_calibrated_node(c, 4);
  const double optimizer_m2 = 0.006 * (1.0 - 22.0 / 46.0);
  // D 2 x M 2 on the 4 calibrated ranks: the pairs' slowdown (1.3x), not the unsplit ranks' (1.5x),
  // on their compute and on the collectives that their measured steps held.
  const StepCost dm = predict_step(c, plan(1, 2, 2, 4), local);
  CHECK(dm.slowdown_measured);
  CHECK(dm.compute_slowdown == Approx(1.3));
  CHECK(dm.measured_as == "shard pairs");
  const double mp2 = allreduce_seconds(80.0, 2, *c.intra_node);
  CHECK(dm.compute_s == Approx((0.050 - 0.004 - mp2 + optimizer_m2) * 1.3));
  CHECK(dm.model_parallel_s == Approx(mp2 * 1.3));
  CHECK(dm.compute_s + dm.model_parallel_s == Approx((0.050 - 0.004 + optimizer_m2) * 1.3));
  // Without the pairs' step, the unsplit ranks' one-thread slowdown stands in.
  Calibration unpaired = c;
  unpaired.shared_split_step_s = 0.0;
  const StepCost unsplit_slowdown = predict_step(unpaired, plan(1, 2, 2, 4), local);
  CHECK(unsplit_slowdown.compute_slowdown == Approx(1.5));
  CHECK(unsplit_slowdown.model_parallel_s == Approx(mp2));
  // Calibrated on 2 ranks, the split step is already the pair filling the node: no slowdown on
  // top of it (the members' one-thread 1.5x would count the sharing twice).
  Calibration two = c;
  two.intra_node_ranks = 2;
  two.shared_split_step_s = 0.0;
  const StepCost pair = predict_step(two, plan(1, 1, 2, 2), local);
  CHECK(pair.compute_slowdown == Approx(1.0));
  CHECK(pair.measured_as == "shard pairs");
  CHECK(pair.step_s == Approx(0.050 - 0.004 + optimizer_m2));
  // M = 1 plans on those ranks keep the unsplit ranks' measurement.
  CHECK(predict_step(c, plan(4, 1, 1, 4), local).compute_slowdown == Approx(1.5));

  // The pairs stepped independently, half their steps at 0.8 of the mean and half at 1.2: two
  // replicas of them wait each step for the slower, 1.2 three times in four, 1.1x the mean.
  Calibration spread = c;
  spread.shared_split_spread = {0.8, 1.2};
  const StepCost waiting = predict_step(spread, plan(1, 2, 2, 4), local);
  CHECK(waiting.slowest_replica == Approx(1.1));
  CHECK(waiting.compute_slowdown == Approx(1.3 * 1.1));
  CHECK(waiting.step_s - waiting.data_parallel_s == Approx((0.050 - 0.004 + optimizer_m2) * 1.43));
  CHECK(waiting.data_parallel_s == Approx(dm.data_parallel_s));
  // Two groups of one replica wait for nobody.
  const StepCost groups = predict_step(spread, plan(2, 1, 2, 4), local);
  CHECK(groups.slowest_replica == 1.0);
  CHECK(groups.compute_slowdown == Approx(1.3));
  // 4 micro-batches a step: the replicas wait once for a sum of 4, which spreads half as widely
  // (0.9 and 1.1): (0.9 + 3 x 1.1) / 4.
  const StepCost accumulating = predict_step(spread, plan(1, 2, 2, 4, 10, 4), local);
  CHECK(accumulating.slowest_replica == Approx(1.05));
  CHECK(accumulating.waits_for == 2);
  // Narrowed about the spread's own mean, whatever its scale: 8 and 12 become 9 and 11.
  Calibration unscaled = spread;
  unscaled.shared_split_spread = {8.0, 12.0};
  CHECK(predict_step(unscaled, plan(1, 2, 2, 4, 10, 4), local).slowest_replica == Approx(1.05));
  // Without the pairs' steps the members stand in, one rank each: the 2 shards of each group's
  // one replica wait for each other too.
  Calibration members_only = spread;
  members_only.shared_split_step_s = 0.0;
  members_only.shared_split_spread.clear();
  members_only.shared_steps = {StepTiming{1, 0.090, {0.5, 1.5}}};
  const StepCost shards = predict_step(members_only, plan(2, 1, 2, 4), local);
  CHECK(shards.measured_as == "members");
  CHECK(shards.slowest_replica == Approx(1.25));
  CHECK(shards.waits_for == 2);
  CHECK(shards.compute_slowdown == Approx(1.5 * 1.25));
  // D 2 x M 2 from the members: the slowest of 4 ranks.
  CHECK(predict_step(members_only, plan(1, 2, 2, 4), local).slowest_replica ==
        Approx((0.5 + 1.5 * 15) / 16));
  // Calibrated on 2 ranks, the split step's own spread is the shard pairs'.
  Calibration two_spread = two;
  two_spread.split_spread = {0.8, 1.2};
  CHECK(predict_step(two_spread, plan(1, 2, 2, 2), on_calibrated_node(two_spread, 4))
            .slowest_replica == Approx(1.1));
}

TEST_CASE("replicas measured stepping alone wait for the slowest of them", "[cost]") {
  CHECK(expected_slowest({0.8, 1.2}, 1) == 1.0);
  CHECK(expected_slowest({1.2, 0.8}, 2) == Approx(1.1));
  // Of three draws all fall on 0.8 one time in eight.
  CHECK(expected_slowest({0.8, 1.2}, 3) == Approx((0.8 + 7 * 1.2) / 8));
  CHECK(expected_slowest({1.0, 1.0, 1.0}, 4) == Approx(1.0));
  CHECK(expected_slowest({}, 4) == 1.0);
  // Points not scaled to their mean: still over the mean.
  CHECK(expected_slowest({8.0, 12.0}, 2) == Approx(1.1));

  Calibration c = mlp();
  c.intra_node = LinkCost{1e-6, 1e9};
  c.intra_node_ranks = 4;
  c.shared_steps = {StepTiming{1, 0.090, {0.5, 1.0, 1.5}}};
  c.replica_pairs_step = StepTiming{1, 0.100, {0.5, 1.5}};
  const PredictionSettings local = on_calibrated_node(c, 4);
  // D = 4 on one thread takes the members' steps: the slowest of 4 of their three points.
  const StepCost four = predict_step(c, plan(1, 4, 1, 4), local);
  CHECK(four.measured_as == "members");
  const double slowest_of_4 = (0.5 * 1 + 1.0 * (16 - 1) + 1.5 * (81 - 16)) / 81.0;
  CHECK(four.slowest_replica == Approx(slowest_of_4));
  CHECK(four.compute_slowdown == Approx(0.090 / 0.060 * slowest_of_4));
  // The replica pairs' steps held their sums, and so the wait: no factor on top.
  const StepCost pairs = predict_step(c, plan(2, 2, 1, 4), local);
  CHECK(pairs.measured_as == "replica pairs");
  CHECK(pairs.slowest_replica == 1.0);
  CHECK(pairs.compute_slowdown == Approx(0.100 / 0.060));
  // Members alone wait for nobody.
  CHECK(predict_step(c, plan(4, 1, 1, 4), local).slowest_replica == 1.0);
  // A preset network is not the calibrated node: its spread does not apply.
  CHECK(predict_step(c, plan(1, 4, 1, 4), settings(4)).slowest_replica == 1.0);
}

TEST_CASE("a calibration of another local batch is refused", "[cost]") {
  CHECK_THROWS_AS(predict_step(mlp(), plan(1, 1, 1, 1, 32), settings(4)), ConfigError);
}

TEST_CASE("a calibration survives its JSON round trip", "[cost]") {
  Calibration written = mlp();
  written.intra_node = LinkCost{2e-6, 5e9};
  written.intra_node_ranks = 2;
  written.split_step_s = 0.05;
  written.split_optimizer_s = 0.004;
  written.shared_split_step_s = 0.06;
  written.shared_steps = {StepTiming{1, 0.07, {0.9, 1.1}}, StepTiming{2, 0.045, {}}};
  written.replica_pairs_step = StepTiming{2, 0.052, {0.7, 1.0, 1.3}};
  written.shared_split_spread = {0.95, 1.05};
  written.split_spread = {0.9, 1.1};
  const Calibration fresh;
  REQUIRE_FALSE(fresh == written);
  const Calibration read = calibration_from_json(calibration_to_json(written), "test");
  CHECK(read == written);
  CHECK(read.layers[1].split == SplitKind::column);
  CHECK(read.intra_node->bytes_per_s == 5e9);
  CHECK(read.shared_steps[1].step_s == 0.045);
  CHECK(read.shared_split_step_s == 0.06);
  CHECK(read.replica_pairs_step == StepTiming{2, 0.052, {0.7, 1.0, 1.3}});
  CHECK(read.shared_steps[0].spread == std::vector<double>{0.9, 1.1});
  CHECK(read.shared_split_spread == std::vector<double>{0.95, 1.05});
  CHECK(read.split_spread == std::vector<double>{0.9, 1.1});
  // A calibration from before the spreads: read without them.
  nlohmann::json unspread = calibration_to_json(written);
  unspread["intra_node"]["shared_steps"][0].erase("spread");
  unspread["split_over_2"].erase("all_pairs_spread");
  const Calibration old_read = calibration_from_json(unspread, "old.json");
  CHECK(old_read.shared_steps[0].spread.empty());
  CHECK(old_read.shared_split_spread.empty());
  nlohmann::json negative = calibration_to_json(written);
  negative["split_over_2"]["all_pairs_spread"][0] = -0.5;
  CHECK_THROWS_AS(calibration_from_json(negative, "x.json"), DataError);
  nlohmann::json zero = calibration_to_json(written);
  zero["intra_node"]["shared_steps"][0]["spread"][1] = 0.0;
  CHECK_THROWS_AS(calibration_from_json(zero, "x.json"), DataError);
  nlohmann::json not_numbers = calibration_to_json(written);
  not_numbers["intra_node"]["replica_pairs_step"]["spread"] = "wide";
  CHECK_THROWS_AS(calibration_from_json(not_numbers, "x.json"), DataError);

  // A calibration from before the share-of-cores step: its one-thread shared step is read.
  nlohmann::json legacy = calibration_to_json(written);
  legacy["intra_node"].erase("shared_steps");
  legacy["intra_node"]["shared_step_s"] = 0.08;
  CHECK(calibration_from_json(legacy, "old.json").shared_steps ==
        std::vector<StepTiming>{StepTiming{1, 0.08, {}}});

  nlohmann::json other = calibration_to_json(written);
  other["format"] = "something else";
  CHECK_THROWS_AS(calibration_from_json(other, "x.json"), DataError);
  nlohmann::json mistyped = calibration_to_json(written);
  mistyped["version"] = "one";
  CHECK_THROWS_AS(calibration_from_json(mistyped, "x.json"), DataError);
  nlohmann::json zero_step = calibration_to_json(written);
  zero_step["intra_node"]["replica_pairs_step"]["step_s"] = 0.0;
  CHECK_THROWS_AS(calibration_from_json(zero_step, "x.json"), DataError);
  nlohmann::json missing = calibration_to_json(written);
  missing.erase("steps");
  CHECK_THROWS_AS(calibration_from_json(missing, "x.json"), DataError);
}

TEST_CASE("gradient buckets: large gradients alone, small ones packed past them", "[cost]") {
  using Buckets = std::vector<std::vector<std::size_t>>;
  // 20 000 floats (78 KiB) is reduced in place; the small ones after it still join the first pack.
  CHECK(gradient_buckets({10, 20000, 30}, 25.0) == Buckets{{0, 2}, {1}});
  // A pack closes at bucket_mib: 1 MiB holds 262 144 floats.
  CHECK(gradient_buckets({10000, 10000, 10000}, 0.06) == Buckets{{0}, {1}, {2}});
  CHECK(gradient_buckets({10000, 5000, 10000}, 0.06) == Buckets{{0, 1}, {2}});
  // 0: every gradient alone.
  CHECK(gradient_buckets({1, 2, 3}, 0.0) == Buckets{{0}, {1}, {2}});
}
