// Worker threads that split the dense layers' units (run.thread_split: units) compute what one
// thread computes: the layer's output and gradients, the model's, and a training's weights up to
// summation order; and the split is chosen, refused and checkpointed as documented.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/dense_layer.hpp"
#include "core/errors.hpp"
#include "core/model.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "core/worker_pool.hpp"
#include "tests/core/layer_specs.hpp"
#include "tests/core/trainer_states.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

using testing::layer;

Tensor random_tensor(const Shape& shape, Rng& rng) {
  Tensor t(shape);
  for (float& v : t.values()) v = rng.uniform(-1.0f, 1.0f);
  return t;
}

std::vector<float> copy_of(const Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

double largest_magnitude(const std::vector<float>& a) {
  double largest = 0.0;
  for (float v : a) largest = std::max(largest, std::abs(static_cast<double>(v)));
  return largest;
}

// small_config's data and MLP with 24 hidden units: 1024 + 256 synthetic 1x8x8 images of 4 classes,
// flatten -> dense 24 -> relu -> dense 4, SGD with momentum, batch 32, 2 epochs.
Config mlp_config() {
  Config c = testing::small_config();
  c.file = "unit_split.yaml";
  c.run.seed = 23;
  c.layers[1].units = 24;
  c.training.epochs = 2;
  return c;
}

std::vector<float> all_weights(Model& model) {
  std::vector<float> all;
  for (const auto& p : model.params())
    all.insert(all.end(), p.value->values().begin(), p.value->values().end());
  return all;
}

}  // namespace

TEST_CASE("a dense layer's units split over workers give the whole layer's output and gradients",
          "[unit_split]") {
  // 10 units over 3 workers is uneven; 2 units over 3 leaves a worker with none.
  for (const std::int64_t units : {10, 2})
    for (const int workers : {2, 3}) {
      CAPTURE(units, workers);
      DenseLayer dense("fc", units, InitKind::glorot);
      dense.build({13});
      Rng rng(5);
      dense.initialize(rng);
      const Tensor in = random_tensor({7, 13}, rng), grad_out = random_tensor({7, units}, rng);
      Tensor out, grad_in;
      dense.forward(in, out, true);
      dense.backward(in, out, grad_out, &grad_in);
      const auto params = dense.params();
      const auto whole_out = copy_of(out), whole_grad_in = copy_of(grad_in),
                 whole_dw = copy_of(*params[0].grad), whole_db = copy_of(*params[1].grad);
      REQUIRE(largest_magnitude(whole_out) > 0.1);
      REQUIRE(largest_magnitude(whole_dw) > 0.1);

      WorkerPool pool(workers);
      dense.prepare_unit_split(workers);
      Tensor split_out({7, units}), split_grad_in({7, 13});
      split_out.fill(9.0f);
      split_grad_in.fill(9.0f);
      params[0].grad->fill(9.0f);
      params[1].grad->fill(9.0f);
      pool.run([&](int w) { dense.forward_units(in, split_out, w); });
      pool.run([&](int w) { dense.backward_units(in, grad_out, w, true); });
      pool.run([&](int w) {
        const auto [first, last] = worker_share(13, workers, w);
        dense.add_unit_input_grads(split_grad_in, first, last);
      });
      CHECK(largest_difference(copy_of(split_out), whole_out) < 1e-5);
      CHECK(largest_difference(copy_of(*params[0].grad), whole_dw) < 1e-5);
      CHECK(largest_difference(copy_of(*params[1].grad), whole_db) < 1e-5);
      CHECK(largest_difference(copy_of(split_grad_in), whole_grad_in) < 1e-5);
    }
}

TEST_CASE("a model whose workers split its units gives one thread's logits and gradients",
          "[unit_split]") {
  // An activation after a dense layer runs on each worker's columns with it; one after dropout
  // runs whole on the calling thread, after the input gradient's parts were summed; two dense
  // layers in a row sum those parts in the lower one's run.
  const std::vector<std::vector<LayerSpec>> models = {
      {layer(LayerKind::flatten, "flat"), layer(LayerKind::dense, "fc1", 20),
       layer(LayerKind::dropout, "drop"), layer(LayerKind::tanh, "act"),
       layer(LayerKind::dense, "fc2", 16), layer(LayerKind::relu, "relu"),
       layer(LayerKind::dense, "fc3", 3)},
      {layer(LayerKind::flatten, "flat"), layer(LayerKind::dense, "fc1", 12),
       layer(LayerKind::leaky_relu, "leaky"), layer(LayerKind::dense, "fc2", 10),
       layer(LayerKind::dense, "fc3", 7), layer(LayerKind::sigmoid, "sig"),
       layer(LayerKind::dense, "fc4", 3)}};
  for (std::size_t m = 0; m < models.size(); ++m) {
    CAPTURE(m);
    std::vector<LayerSpec> specs = models[m];
    if (m == 0) specs[2].rate = 0.25f;
    Rng rng(8);
    const Tensor x = random_tensor({9, 1, 4, 4}, rng), grad_logits = random_tensor({9, 3}, rng);
    // A fresh model for each pass (the same seed, the same weights): one pass's outputs and
    // gradients must not stand in for another's.
    const auto pass = [&](WorkerPool* pool) {
      Model model(specs, {1, 4, 4}, 3, 31);
      REQUIRE(model.can_split_units());
      model.set_noise_position(3, 40);  // the same dropout masks in both passes
      std::vector<float> result = copy_of(model.forward(x, true, pool));
      model.backward(x, grad_logits, {}, pool);
      for (const auto& p : model.params())
        result.insert(result.end(), p.grad->values().begin(), p.grad->values().end());
      return result;
    };
    const auto one = pass(nullptr);
    REQUIRE(largest_magnitude(one) > 0.1);
    for (const int workers : {2, 3}) {
      WorkerPool pool(workers);
      const auto split = pass(&pool);
      CHECK(largest_difference(split, one) < 1e-5);
    }
  }
  // A model with a conv cannot split its units.
  std::vector<LayerSpec> cnn = {layer(LayerKind::conv2d, "conv"), layer(LayerKind::flatten, "flat"),
                                layer(LayerKind::dense, "fc", 3)};
  cnn[0].filters = 2;
  cnn[0].kernel = 3;
  Model conv_model(cnn, {1, 4, 4}, 3, 31);
  CHECK_FALSE(conv_model.can_split_units());
  CHECK(conv_model.first_non_dense_name() == "conv");
}

TEST_CASE("an MLP's workers split its units and train as one thread does up to summation order",
          "[unit_split][trainer]") {
  Config config = mlp_config();
  config.run.thread_split = ThreadSplit::units;
  const TrainingData data = load_training_data(config);
  Trainer one(config, build_model(config, data), data, standalone_plan(config), 1),
      units(config, build_model(config, data), data, standalone_plan(config), 3);
  Config batch_config = config;
  batch_config.run.thread_split = ThreadSplit::batch;
  Trainer batch(batch_config, build_model(batch_config, data), data, standalone_plan(batch_config),
                3);
  CHECK_FALSE(one.splits_units());
  CHECK(units.splits_units());
  CHECK_FALSE(batch.splits_units());
  const auto initial = all_weights(one.model());
  for (int e = 0; e < 2; ++e) {
    const auto m1 = one.run_epoch({}), mu = units.run_epoch({});
    batch.run_epoch({});
    CHECK(mu.train_loss == Approx(m1.train_loss).epsilon(1e-5));
  }
  const auto w1 = all_weights(one.model());
  REQUIRE(largest_difference(w1, initial) > 0.01);  // it trained
  const double scale = largest_magnitude(w1);
  const double units_off = largest_difference(all_weights(units.model()), w1) / scale,
               batch_off = largest_difference(all_weights(batch.model()), w1) / scale;
  WARN("after 2 epochs, largest weight difference relative to the largest weight: units "
       << units_off << ", batch " << batch_off);
  CHECK(units_off < 1e-5);
  CHECK(batch_off < 1e-5);
}

TEST_CASE("frozen dense layers and more workers than units train as one thread does",
          "[unit_split][trainer]") {
  // fc1 frozen at the bottom, fc2 in the middle; 5 workers share fc3's 4 units, so one has none.
  Config config = mlp_config();
  config.layers.insert(config.layers.begin() + 3,
                       {layer(LayerKind::dense, "fc_mid", 16), layer(LayerKind::tanh, "mid_act")});
  config.layers.back().name = "fc3";
  config.training.epochs = 1;
  config.run.thread_split = ThreadSplit::units;
  for (const char* frozen : {"fc1", "fc_mid"}) {
    CAPTURE(frozen);
    Config c = config;
    c.training.freeze = {FrozenLayer{frozen, {}}};
    const TrainingData data = load_training_data(c);
    Trainer one(c, build_model(c, data), data, standalone_plan(c), 1),
        five(c, build_model(c, data), data, standalone_plan(c), 5);
    REQUIRE(five.splits_units());
    const auto before = all_weights(one.model());
    one.run_epoch({});
    five.run_epoch({});
    const auto w1 = all_weights(one.model()), w5 = all_weights(five.model());
    REQUIRE(largest_difference(w1, before) > 0.01);
    CHECK(largest_difference(w5, w1) / largest_magnitude(w1) < 1e-5);
    // The frozen layer's weight kept its initial values on both.
    for (const auto& p : five.model().params())
      if (p.name.rfind(std::string(frozen) + "/", 0) == 0) {
        CHECK_FALSE(p.trainable);
        Model initial = build_model(c, data);
        for (const auto& q : initial.params())
          if (q.name == p.name) CHECK(copy_of(*q.value) == copy_of(*p.value));
      }
  }
}

TEST_CASE("auto takes units while they move less than the batch split would; units takes any",
          "[unit_split][trainer]") {
  // The benchmark MLP on 1x28x28 inputs: 535 818 weights, 1 552 dense inputs a sample, so auto
  // takes units up to a local batch of 115; the small test MLP moves more activations than
  // weights at batch 32.
  Config mlp = mlp_config();
  mlp.data.synthetic = SyntheticSpec{256, 16, 10, 1, 28, 28};
  mlp.layers = {layer(LayerKind::flatten, "flat"), layer(LayerKind::dense, "fc1", 512),
                layer(LayerKind::relu, "r1"),      layer(LayerKind::dense, "fc2", 256),
                layer(LayerKind::relu, "r2"),      layer(LayerKind::dense, "fc3", 10)};
  const TrainingData mlp_data = load_training_data(mlp);
  for (const auto& [batch, units] : {std::pair{64, true}, {115, true}, {116, false}}) {
    CAPTURE(batch);
    Config c = mlp;
    c.training.local_batch = batch;
    Trainer trainer(c, build_model(c, mlp_data), mlp_data, standalone_plan(c), 2);
    CHECK(trainer.splits_units() == units);
  }
  const Config small = mlp_config();
  const TrainingData small_data = load_training_data(small);
  CHECK_FALSE(Trainer(small, build_model(small, small_data), small_data, standalone_plan(small), 2)
                  .splits_units());

  // 1x64x64 inputs: a worker's chunk holds 3 MiB / 16 KiB = 192 samples.
  Config config = mlp_config();
  config.data.synthetic = SyntheticSpec{640, 32, 4, 1, 64, 64};
  config.training.epochs = 1;
  for (const int local_batch : {256, 2}) {
    CAPTURE(local_batch);
    Config c = config;
    c.training.local_batch = local_batch;
    const TrainingData data = load_training_data(c);
    Trainer one(c, build_model(c, data), data, standalone_plan(c), 1),
        automatic(c, build_model(c, data), data, standalone_plan(c), 3);
    REQUIRE(automatic.chunk_samples() == 192);
    CHECK(automatic.splits_units() == (local_batch == 2));
    c.run.thread_split = ThreadSplit::units;
    Trainer units(c, build_model(c, data), data, standalone_plan(c), 3);
    REQUIRE(units.splits_units());
    one.run_epoch({});
    units.run_epoch({});
    const auto w1 = all_weights(one.model());
    CHECK(largest_difference(all_weights(units.model()), w1) / largest_magnitude(w1) < 1e-5);
  }
}

TEST_CASE("a training whose workers split the units resumes on a batch split, and back",
          "[unit_split][trainer][state]") {
  Config units_config = mlp_config();
  units_config.run.thread_split = ThreadSplit::units;
  Config batch_config = units_config;
  batch_config.run.thread_split = ThreadSplit::batch;
  const TrainingData data = load_training_data(units_config);
  // Epoch 1 on units, epoch 2 on batch; and the other way round; against both on units.
  Trainer through(units_config, build_model(units_config, data), data,
                  standalone_plan(units_config), 2);
  through.run_epoch({});
  through.run_epoch({});
  for (const bool units_first : {true, false}) {
    CAPTURE(units_first);
    const Config& first_config = units_first ? units_config : batch_config;
    const Config& second_config = units_first ? batch_config : units_config;
    Trainer first(first_config, build_model(first_config, data), data,
                  standalone_plan(first_config), 2);
    REQUIRE(first.splits_units() == units_first);
    first.run_epoch({});
    StateDict state;
    first.save_state(state);
    Trainer second(second_config, build_model(second_config, data), data,
                   standalone_plan(second_config), 2);
    REQUIRE(largest_difference(all_weights(second.model()), all_weights(first.model())) > 0.01);
    second.load_state(state);
    CHECK(all_weights(second.model()) == all_weights(first.model()));
    CHECK(second.position().epoch == 2);
    second.run_epoch({});
    const double off =
        largest_difference(all_weights(second.model()), all_weights(through.model())) /
        largest_magnitude(all_weights(through.model()));
    CHECK(off < 1e-5);
  }
}

TEST_CASE("run.thread_split is read, and units on a model with a conv is a ConfigError",
          "[unit_split][config]") {
  const std::string head = "run: {name: t, thread_split: ";
  const std::string rest = R"(}
data: {source: synthetic, synthetic: {train: 64, test: 16, classes: 4, channels: 1, height: 8, width: 8}}
model:
  layers: [flatten, {dense: {units: 4}}]
)";
  CHECK(parse_config(head + "units" + rest, "t.yaml").run.thread_split == ThreadSplit::units);
  CHECK(parse_config(head + "batch" + rest, "t.yaml").run.thread_split == ThreadSplit::batch);
  CHECK(parse_config(head + "auto" + rest, "t.yaml").run.thread_split == ThreadSplit::automatic);
  CHECK_THROWS_WITH(parse_config(head + "rows" + rest, "t.yaml"),
                    Contains("run.thread_split") && Contains("units"));
  const std::string conv = R"(}
data: {source: synthetic, synthetic: {train: 64, test: 16, classes: 4, channels: 1, height: 8, width: 8}}
model:
  layers: [{conv2d: {filters: 2, kernel: 3}}, flatten, {dense: {units: 4}}]
)";
  CHECK_NOTHROW(parse_config(head + "batch" + conv, "t.yaml"));
  try {
    parse_config(head + "units" + conv, "t.yaml");
    FAIL("no ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("t.yaml:1:") && Contains("run.thread_split") &&
                             Contains("conv2d_0") && Contains("use batch"));
  }
  // A config built in code meets the same check in the trainer, on more than one thread.
  Config config = mlp_config();
  config.layers.insert(config.layers.begin(), layer(LayerKind::conv2d, "conv"));
  config.layers[0].filters = 2;
  config.layers[0].kernel = 3;
  config.run.thread_split = ThreadSplit::units;
  const TrainingData data = load_training_data(config);
  CHECK_NOTHROW(Trainer(config, build_model(config, data), data, standalone_plan(config), 1));
  CHECK_THROWS_AS(Trainer(config, build_model(config, data), data, standalone_plan(config), 2),
                  ConfigError);
}
