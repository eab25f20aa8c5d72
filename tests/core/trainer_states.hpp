// Trainer states for tests: a small MLP, a config with every kind of state, one whose samples go
// through in chunks, stopping a training at a step, and comparing two saved states key by key.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "core/config.hpp"
#include "core/state.hpp"
#include "core/trainer.hpp"
#include "tests/core/layer_specs.hpp"

namespace strata::testing {

// 1024 + 256 synthetic 1x8x8 images of 4 classes (~920 train after the 10% validation hold-out),
// an MLP flatten -> dense 32 -> relu -> dense 4, SGD with momentum, batch 32.
inline Config small_config() {
  Config c;
  c.file = "trainer_test.yaml";
  c.run.seed = 17;
  c.data.source = DataSource::synthetic;
  c.data.synthetic = SyntheticSpec{1024, 256, 4, 1, 8, 8};
  c.layers = {layer(LayerKind::flatten, "flat"), layer(LayerKind::dense, "fc1", 32),
              layer(LayerKind::relu, "relu"), layer(LayerKind::dense, "fc2", 4)};
  c.training.epochs = 3;
  c.training.local_batch = 32;
  c.training.optimizer.kind = OptimizerKind::sgd;
  c.training.optimizer.lr = 0.05;
  c.training.optimizer.momentum = 0.9;
  c.stages = {StageSpec{}};
  return c;
}

// A small MLP with dropout, Adam and a cosine schedule: every kind of state the trainer has.
inline Config state_config(OptimizerKind optimizer) {
  Config c;
  c.file = "state_test.yaml";
  c.run.seed = 23;
  c.data.source = DataSource::synthetic;
  c.data.synthetic = SyntheticSpec{600, 128, 4, 1, 6, 6};
  c.layers = {layer(LayerKind::flatten, "flat"), layer(LayerKind::dense, "fc1", 16),
              layer(LayerKind::dropout, "drop"), layer(LayerKind::relu, "relu"),
              layer(LayerKind::dense, "fc2", 4)};
  c.layers[2].rate = 0.25f;
  c.training.epochs = 3;
  c.training.local_batch = 16;
  c.training.optimizer.kind = optimizer;
  c.training.optimizer.lr = optimizer == OptimizerKind::adam ? 0.01 : 0.05;
  c.training.optimizer.momentum = optimizer == OptimizerKind::adam ? 0.0 : 0.9;
  c.training.schedule.kind = ScheduleKind::cosine;
  c.stages = {StageSpec{}};
  return c;
}

// A CNN on 130x130 images whose pooling keeps 196 608 floats a sample (its conv's output runs
// through in slices of one sample): a worker takes 4 samples at a time (Trainer::chunk_samples),
// so a local batch of 16 goes through in chunks.
inline Config chunked_config() {
  return parse_config(R"(run: {name: chunks, seed: 6}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 96, test: 16, classes: 4, channels: 1, height: 130, width: 130}
model:
  layers:
    - conv2d: {filters: 48, kernel: 3, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dropout: {rate: 0.3}
    - dense: {units: 4, init: glorot}
training:
  epochs: 1
  local_batch: 16
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
parallel: {lr_scaling: none}
)",
                      "chunks.yaml");
}

// Stops a training after `steps` optimizer steps, at a step boundary.
struct StopHere {};

inline void train_steps(Trainer& trainer, std::int64_t steps) {
  trainer.set_step_hook([&] {
    if (trainer.position().global_step == steps) throw StopHere{};
  });
  try {
    while (true) trainer.run_epoch({});
  } catch (const StopHere&) {
  }
  trainer.set_step_hook({});
}

// Wall-clock fields (seconds, samples/s) are state too, but two trainings never share them.
inline bool timing(const std::string& key) {
  return key.find("seconds") != std::string::npos || key.find("samples_per_s") != std::string::npos;
}

inline void require_same(const StateDict& a, const StateDict& b, bool except_timing = false) {
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (const auto& [key, t] : a.tensors()) {
    INFO(key);
    REQUIRE(b.has_tensor(key));
    CHECK(b.tensor(key).shard == t.shard);
    CHECK(b.tensor(key).local_shape == t.local_shape);
    CHECK(b.tensor(key).values == t.values);
  }
  REQUIRE(a.scalars().size() == b.scalars().size());
  for (const auto& [key, v] : a.scalars()) {
    INFO(key);
    REQUIRE(b.has_scalar(key));
    if (!(except_timing && timing(key))) CHECK((b.scalars().at(key) == v));
  }
}

// Whether the two states differ in some tensor value and some scalar.
inline bool differ_everywhere(const StateDict& a, const StateDict& b) {
  bool tensor = false, scalar = false;
  for (const auto& [key, t] : a.tensors()) tensor = tensor || b.tensor(key).values != t.values;
  for (const auto& [key, v] : a.scalars())
    scalar = scalar || !b.has_scalar(key) || b.scalars().at(key) != v;
  return tensor && scalar;
}

}  // namespace strata::testing
