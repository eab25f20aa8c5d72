// Trainer on a small synthetic task: it learns, it is deterministic, threads only change rounding,
// and divergence and impossible batch sizes are reported with the right error types.
#include <catch2/catch.hpp>

#include <thread>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/errors.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "tests/core/layer_specs.hpp"
#include "tests/core/one_replica_sync.hpp"
#include "tests/core/temp_dir.hpp"
#include "tests/core/trainer_states.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

using testing::layer;

using testing::small_config;

// The largest absolute difference between two models' weights, parameter by parameter.
double largest_weight_difference(Model& a, Model& b) {
  const auto pa = a.params(), pb = b.params();
  double worst = 0.0;
  for (std::size_t k = 0; k < pa.size(); ++k)
    for (std::int64_t i = 0; i < pa[k].value->size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs((*pa[k].value)[i] - (*pb[k].value)[i])));
  return worst;
}

std::vector<std::vector<float>> snapshot(Model& model) {
  std::vector<std::vector<float>> out;
  for (auto& p : model.params())
    out.emplace_back(p.value->values().begin(), p.value->values().end());
  return out;
}

}  // namespace

TEST_CASE("the trainer learns the synthetic task in three epochs", "[trainer]") {
  const Config config = small_config();
  const TrainingData data = load_training_data(config);
  REQUIRE(data.train.count() + data.validation.count() == 1024);
  REQUIRE(data.test.count() == 256);
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 1);
  CHECK(trainer.steps_per_epoch() == data.train.count() / 32);

  std::vector<EpochMetrics> epochs;
  for (int e = 1; e <= 3; ++e) epochs.push_back(trainer.run_epoch({}));
  std::string history;
  for (const auto& m : epochs)
    history += fmt::format("epoch {} train loss {:.4f} test accuracy {:.4f}\n", m.epoch,
                           m.train_loss, m.test_accuracy);
  INFO(history);
  CHECK(epochs[2].train_loss < epochs[0].train_loss);
  CHECK(epochs[2].test_accuracy > 0.9);
  CHECK(epochs[2].val_accuracy > 0.9);
  // Chance is 0.25 and log(4) = 1.386: a model that learned nothing would sit there.
  CHECK(epochs[2].test_loss < 0.5);
  CHECK(epochs[2].epoch == 3);
  CHECK(epochs[2].lr == config.training.optimizer.lr);
}

TEST_CASE("the hooks run on the calling thread, after every step and every evaluation batch",
          "[trainer]") {
  Config config = small_config();
  config.training.epochs = 1;
  config.data.synthetic.test = 1000;  // four evaluation batches of at most 256
  const TrainingData data = load_training_data(config);
  auto batches = [](std::int64_t rows) { return (rows + 255) / 256; };
  const auto caller = std::this_thread::get_id();
  for (const int threads : {1, 2}) {
    Trainer trainer(config, build_model(config, data), data, standalone_plan(config), threads);
    int steps = 0, evaluation_calls = 0;
    bool elsewhere = false;
    trainer.set_step_hook([&] {
      ++steps;
      elsewhere = elsewhere || std::this_thread::get_id() != caller;
    });
    trainer.set_evaluation_hook([&] {
      ++evaluation_calls;
      elsewhere = elsewhere || std::this_thread::get_id() != caller;
    });
    trainer.run_epoch({});
    CHECK(steps == trainer.steps_per_epoch());
    CHECK_FALSE(elsewhere);
    // One call per batch of the calling thread's share: with one thread, every batch.
    if (threads == 1)
      CHECK(evaluation_calls == batches(data.validation.count()) + batches(data.test.count()));
    else
      CHECK(evaluation_calls >= 2 + 1);  // test: 500 rows on worker 0, two batches
  }
}

TEST_CASE("the step hook sees each step's metrics, which sum to the epoch's", "[trainer]") {
  Config config = small_config();
  config.training.epochs = 2;
  const TrainingData data = load_training_data(config);
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 2);
  std::vector<StepMetrics> steps;
  trainer.set_step_hook([&] { steps.push_back(trainer.last_step()); });
  const EpochMetrics first = trainer.run_epoch({});
  trainer.run_epoch({});
  const auto n = static_cast<std::size_t>(trainer.steps_per_epoch());
  REQUIRE(steps.size() == 2 * n);
  double loss = 0.0, accuracy = 0.0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i].global_step == static_cast<std::int64_t>(i + 1));
    CHECK(steps[i].epoch == static_cast<int>(i / n) + 1);
    CHECK(steps[i].step == static_cast<std::int64_t>(i % n + 1));
    CHECK(steps[i].lr == config.training.optimizer.lr);
    if (i < n) loss += steps[i].loss, accuracy += steps[i].accuracy;
  }
  // Every step trains on a whole global batch, so the epoch's means are the steps' means.
  CHECK(loss / static_cast<double>(n) == Approx(first.train_loss).epsilon(1e-12));
  CHECK(accuracy / static_cast<double>(n) == Approx(first.train_accuracy).epsilon(1e-12));
  CHECK(steps.back().loss < steps.front().loss);
}

TEST_CASE("two trainers with the same config and threads give bit-identical weights", "[trainer]") {
  const ThreadSplit split = GENERATE(ThreadSplit::batch, ThreadSplit::units);
  CAPTURE(split == ThreadSplit::units);
  Config config = small_config();
  config.run.thread_split = split;
  config.layers.insert(config.layers.begin() + 3,
                       layer(LayerKind::dropout, "drop"));  // the noise is seeded too
  const TrainingData data = load_training_data(config);
  Trainer a(config, build_model(config, data), data, standalone_plan(config), 2),
      b(config, build_model(config, data), data, standalone_plan(config), 2);
  REQUIRE(a.splits_units() == (split == ThreadSplit::units));
  CHECK(snapshot(a.model()) == snapshot(b.model()));
  const auto ma = a.run_epoch({}), mb = b.run_epoch({});
  CHECK(snapshot(a.model()) == snapshot(b.model()));
  CHECK(ma.train_loss == mb.train_loss);
  CHECK(ma.test_loss == mb.test_loss);

  // And the run seed matters: without this, equality above could come from ignoring the seed.
  Config other = config;
  other.run.seed = 18;
  Trainer c(other, build_model(other, data), data, standalone_plan(other), 2);
  c.run_epoch({});
  CHECK(snapshot(c.model()) != snapshot(a.model()));
}

TEST_CASE("one and two threads give the same weights up to summation order", "[trainer]") {
  const ThreadSplit split = GENERATE(ThreadSplit::batch, ThreadSplit::units);
  CAPTURE(split == ThreadSplit::units);
  Config config = small_config();
  config.run.thread_split = split;
  const TrainingData data = load_training_data(config);
  Trainer one(config, build_model(config, data), data, standalone_plan(config), 1),
      two(config, build_model(config, data), data, standalone_plan(config), 2);
  REQUIRE(two.threads() == 2);
  REQUIRE(two.splits_units() == (split == ThreadSplit::units));
  one.run_epoch({});
  two.run_epoch({});
  const auto w1 = snapshot(one.model()), w2 = snapshot(two.model());
  REQUIRE(w1.size() == w2.size());
  double worst_relative = 0.0, worst_absolute = 0.0;
  for (std::size_t k = 0; k < w1.size(); ++k)
    for (std::size_t i = 0; i < w1[k].size(); ++i) {
      const double a = w1[k][i], b = w2[k][i], diff = std::abs(a - b);
      worst_absolute = std::max(worst_absolute, diff);
      // Relative to the weight's own size, with a floor so that weights crossing zero do not blow
      // it up.
      worst_relative = std::max(worst_relative, diff / std::max({std::abs(a), std::abs(b), 1e-2}));
    }
  WARN("1 vs 2 threads after one epoch: largest difference " << worst_absolute << " absolute, "
                                                             << worst_relative << " relative");
  CHECK(worst_relative < 1e-4);
}

TEST_CASE("a diverging run throws DivergedError", "[trainer]") {
  Config config = small_config();
  config.training.optimizer.lr = 1e6;
  const TrainingData data = load_training_data(config);
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 1);
  try {
    for (int e = 1; e <= 3; ++e) trainer.run_epoch({});
    FAIL("training at lr 1e6 did not diverge");
  } catch (const DivergedError& e) {
    CHECK_THAT(e.what(), Contains("diverged"));
    CHECK_THAT(e.what(), Contains("epoch 1"));  // it blows up at once, not after epochs of garbage
  }
}

TEST_CASE("a local batch larger than the training set is a ConfigError", "[trainer]") {
  Config config = small_config();
  const TrainingData data = load_training_data(config);
  config.training.local_batch = static_cast<int>(data.train.count()) + 1;
  try {
    Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 1);
    FAIL("no ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("trainer_test.yaml"));
    CHECK_THAT(e.what(), Contains("training.local_batch"));
  }
  // Exactly the training set is one step per epoch, not an error.
  config.training.local_batch = static_cast<int>(data.train.count());
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 1);
  CHECK(trainer.steps_per_epoch() == 1);
}

TEST_CASE("accumulating K micro-batches of b equals one batch of K*b", "[trainer]") {
  const std::string yaml = R"(run: {name: acc, seed: 4}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 256, test: 32, classes: 4, channels: 1, height: 8, width: 8}
model:
  layers: [flatten, {dense: {units: 16, init: glorot}}, tanh, {dense: {units: 4, init: glorot}}]
training:
  epochs: 1
  local_batch: 64
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
parallel: {lr_scaling: none}
)";
  const ThreadSplit split = GENERATE(ThreadSplit::batch, ThreadSplit::units);
  CAPTURE(split == ThreadSplit::units);
  Config whole = parse_config(yaml, "acc.yaml");
  whole.run.thread_split = split;
  Config parts = whole;
  parts.training.local_batch = 16;
  parts.parallel.accumulate = 4;
  const TrainingData data = load_training_data(whole);
  for (int threads : {1, 2}) {
    Trainer a(whole, build_model(whole, data), data, standalone_plan(whole), threads),
        b(parts, build_model(parts, data), data, standalone_plan(parts), threads);
    REQUIRE(b.splits_units() == (threads > 1 && split == ThreadSplit::units));
    REQUIRE(b.global_batch() == 64);
    REQUIRE(b.steps_per_epoch() == a.steps_per_epoch());
    const auto ma = a.run_epoch({}), mb = b.run_epoch({});
    CHECK(mb.train_loss == Approx(ma.train_loss).epsilon(1e-6));
    const double worst = largest_weight_difference(a.model(), b.model());
    INFO(threads << " thread(s): largest weight difference " << worst);
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("a worker's share larger than its chunk trains as the same batch in micro-batches",
          "[trainer]") {
  const Config whole = strata::testing::chunked_config();
  Config parts = whole;  // the same 16 samples a step as 4 micro-batches of one chunk each
  parts.training.local_batch = 4;
  parts.parallel.accumulate = 4;
  const TrainingData data = load_training_data(whole);
  Trainer reference(parts, build_model(parts, data), data, standalone_plan(parts), 1);
  REQUIRE(reference.chunk_samples() == 4);
  const auto mr = reference.run_epoch({});
  for (int threads : {1, 2}) {
    // One worker takes its 16 samples in 4 chunks, two workers their 8 in 2 each.
    Trainer chunked(whole, build_model(whole, data), data, standalone_plan(whole), threads);
    REQUIRE(chunked.chunk_samples() == 4);
    const auto mc = chunked.run_epoch({});
    CHECK(mc.train_loss == Approx(mr.train_loss).epsilon(1e-5));
    CHECK(mc.train_accuracy == mr.train_accuracy);
    const double worst = largest_weight_difference(chunked.model(), reference.model());
    INFO(threads << " thread(s): largest weight difference " << worst);
    // One worker's chunks are the micro-batches, summed in the same order: bit for bit (a batch of
    // 16 in one pass sums inside its layers in another order). Two workers sum theirs apart.
    if (threads == 1)
      CHECK(worst == 0.0);
    else
      CHECK(worst < 1e-5);
  }
}

TEST_CASE(
    "the workers stepping each layer as backward finishes it give the weights of one step after "
    "backward",
    "[trainer]") {
  const OptimizerKind optimizer = GENERATE(OptimizerKind::sgd, OptimizerKind::adam);
  const int threads = GENERATE(2, 3);
  const bool frozen_dense = GENERATE(false, true);
  // A batch of one sample fewer than workers leaves worker 0 without one: it marks every layer
  // done at once and goes to the pieces of its slice while the others still run forward, so
  // that a piece stepped before its layer is done shows in every run, not only when the timing
  // happens to fall so.
  const bool idle_worker = GENERATE(false, true);
  CAPTURE(optimizer == OptimizerKind::adam, threads, frozen_dense, idle_worker);
  // Parameters of several pieces (fc1's 6400 weights), of one, and a frozen layer between
  // trained ones, whose backward still runs.
  Config config = parse_config(R"(run: {name: overlap, seed: 4}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 240, test: 16, classes: 4, channels: 1, height: 12, width: 12}
model:
  layers:
    - conv2d: {filters: 8, kernel: 3, name: conv}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 32, name: fc1}
    - relu
    - dense: {units: 16, name: fc2}
    - relu
    - dense: {units: 4, name: head}
training:
  epochs: 1
  local_batch: 24
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
)",
                               "overlap.yaml");
  config.training.optimizer.kind = optimizer;
  if (optimizer == OptimizerKind::adam) config.training.optimizer.lr = 0.002;
  if (frozen_dense) config.training.freeze = {{"fc2", {}}};
  if (idle_worker) config.training.local_batch = threads - 1;
  const TrainingData data = load_training_data(config);
  testing::OneReplicaSync one_replica;
  Trainer during(config, build_model(config, data), data, standalone_plan(config), threads),
      after(config, build_model(config, data), data, standalone_plan(config), threads,
            &one_replica);
  REQUIRE(during.steps_during_backward());
  REQUIRE_FALSE(after.steps_during_backward());
  const auto start = snapshot(during.model());
  REQUIRE(start == snapshot(after.model()));
  const auto md = during.run_epoch({}), ma = after.run_epoch({});
  const auto stepped = snapshot(during.model());
  CHECK(stepped == snapshot(after.model()));
  CHECK(md.train_loss == ma.train_loss);
  CHECK(md.test_loss == ma.test_loss);
  // Every trained parameter moved, and the frozen one did not.
  const auto params = during.model().params();
  for (std::size_t k = 0; k < params.size(); ++k) {
    CAPTURE(params[k].name);
    CHECK((stepped[k] == start[k]) == !params[k].trainable);
  }
}

TEST_CASE("more worker threads than samples train as one thread, with a finite loss", "[trainer]") {
  Config config = small_config();
  config.data.synthetic = SyntheticSpec{64, 16, 4, 1, 8, 8};
  config.training.local_batch = 1;               // two of the three workers have no sample
  config.run.thread_split = ThreadSplit::batch;  // auto would split the MLP's units, not the batch
  const TrainingData data = load_training_data(config);
  Trainer one(config, build_model(config, data), data, standalone_plan(config), 1),
      three(config, build_model(config, data), data, standalone_plan(config), 3);
  const auto m1 = one.run_epoch({}), m3 = three.run_epoch({});
  CHECK(std::isfinite(m3.train_loss));
  CHECK(m3.train_loss == Approx(m1.train_loss).epsilon(1e-6));
  CHECK(largest_weight_difference(one.model(), three.model()) < 1e-6);
}

TEST_CASE("reading shards from the file trains exactly as reading everything into memory",
          "[trainer][shards]") {
  strata::testing::TempDir dir;
  const std::string path = dir.file("data.h5");
  SyntheticSpec spec;
  spec.train = 300;
  spec.test = 50;
  spec.classes = 4;
  spec.height = 8;
  spec.width = 8;
  write_dataset(path, make_synthetic(spec, 9));
  const std::string yaml = fmt::format(R"(run: {{name: shards, seed: 2}}
data: {{source: hdf5, path: {}, validation_fraction: 0.2, read: memory}}
model:
  layers: [flatten, {{dense: {{units: 16, init: glorot}}}}, relu, {{dense: {{units: 4, init: glorot}}}}]
training: {{epochs: 1, local_batch: 32, optimizer: {{type: sgd, lr: 0.1, momentum: 0.9}}}}
)",
                                       path);
  const Config in_memory = parse_config(yaml, "shards.yaml");
  Config sharded = in_memory;
  sharded.data.read = DataRead::shards;
  const TrainingData a = load_training_data(in_memory), b = load_training_data(sharded);
  REQUIRE(b.train.reader != nullptr);
  CHECK(b.train.images.empty());  // nothing of the training split was loaded up front
  CHECK(a.train.count() == b.train.count());
  CHECK(a.mean == b.mean);
  CHECK(a.stddev == b.stddev);
  CHECK(a.validation.labels == b.validation.labels);
  Trainer ta(in_memory, build_model(in_memory, a), a, standalone_plan(in_memory), 2),
      tb(sharded, build_model(sharded, b), b, standalone_plan(sharded), 2);
  const auto ma = ta.run_epoch({}), mb = tb.run_epoch({});
  CHECK(ma.train_loss == mb.train_loss);
  CHECK(ma.test_accuracy == mb.test_accuracy);
  auto pa = ta.model().params(), pb = tb.model().params();
  for (std::size_t k = 0; k < pa.size(); ++k)
    CHECK(std::equal(pa[k].value->values().begin(), pa[k].value->values().end(),
                     pb[k].value->values().begin()));
  // 7 steps of 32: only the rows of the batches were read, none twice.
  CHECK(b.train.reader->rows_read() == tb.steps_per_epoch() * 32);
}

TEST_CASE("evaluation gives the same loss and accuracy to the bit on any number of threads",
          "[trainer]") {
  Config config = small_config();
  config.data.synthetic.test = 1100;  // five evaluation chunks, the last one short
  const TrainingData data = load_training_data(config);
  Trainer trained(config, build_model(config, data), data, standalone_plan(config), 2);
  trained.run_epoch({});
  std::vector<Evaluation> results;
  for (const int threads : {1, 2, 3}) {
    Trainer other(config, build_model(config, data), data, standalone_plan(config), threads);
    StateDict state;
    trained.save_state(state);
    other.load_state(state);
    results.push_back(other.evaluate(data.test));
  }
  for (const auto& r : results) {
    CHECK(r.loss == results.front().loss);
    CHECK(r.accuracy == results.front().accuracy);
  }
  CHECK(results.front().accuracy > 0.5);
}

TEST_CASE("linear lr scaling follows the global batch, not the decomposition", "[trainer]") {
  Config config;
  config.file = "lr.yaml";
  config.data.source = DataSource::synthetic;
  config.data.synthetic = SyntheticSpec{1024, 64, 4, 1, 4, 4};
  config.layers = {layer(LayerKind::flatten, "flat"), layer(LayerKind::dense, "fc", 4)};
  config.training.local_batch = 16;
  config.training.optimizer.lr = 0.01;
  config.stages = {StageSpec{}};
  const TrainingData data = load_training_data(config);
  // Global batch 64 as D=1 x K=4 and as D=4 x K=1 (the planner's two answers on 1 and 4 ranks):
  // both take lr 0.01 x 64 / 16 = 0.04 at their first step.
  Plan one_rank = standalone_plan(config);
  one_rank.accumulate = 4;
  Trainer trainer(config, build_model(config, data), data, one_rank, 1);
  trainer.run_epoch({});
  CHECK(trainer.last_epoch().lr == Approx(0.04));
  config.parallel.lr_scaling = LrScaling::none;
  Trainer unscaled(config, build_model(config, data), data, one_rank, 1);
  unscaled.run_epoch({});
  CHECK(unscaled.last_epoch().lr == Approx(0.01));
}
