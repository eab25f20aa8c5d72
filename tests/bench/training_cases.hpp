// The training benchmarks' shared pieces: the benchmark MLP's layers and a plain SGD config.
#pragma once

#include <vector>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/trainer.hpp"

namespace strata::bench {

// MLP 784-512-256-10 (flatten, dense, relu, dense, relu, dense), named as the config parser names
// layers: state keys and the trace go by layer name.
inline std::vector<LayerSpec> benchmark_mlp_layers() {
  const auto layer = [](LayerKind kind, const char* kind_name, int index, int units = 0) {
    LayerSpec s;
    s.kind = kind;
    s.units = units;
    s.name = fmt::format("{}_{}", kind_name, index);
    return s;
  };
  return {layer(LayerKind::flatten, "flatten", 0), layer(LayerKind::dense, "dense", 1, 512),
          layer(LayerKind::relu, "relu", 2),       layer(LayerKind::dense, "dense", 3, 256),
          layer(LayerKind::relu, "relu", 4),       layer(LayerKind::dense, "dense", 5, 10)};
}

// `layers` trained at batch `batch` with SGD momentum 0.9 and a constant rate, epochs enough to
// repeat for as long as a benchmark wants.
inline Config bench_config(const std::vector<LayerSpec>& layers, int batch) {
  Config config;
  config.file = "bench_training";
  config.run.seed = 1;
  config.layers = layers;
  config.training.local_batch = batch;
  config.training.epochs =
      1 << 20;  // the schedule is constant; only keeps the Trainer's bookkeeping in range
  config.training.optimizer.kind = OptimizerKind::sgd;
  config.training.optimizer.lr = 0.01;  // the same on the PyTorch side; speed does not depend on it
  config.training.optimizer.momentum = 0.9;
  return config;
}

// Seconds of training steps in one epoch: run_epoch times the steps alone, then evaluates
// (on a benchmark's tiny test split, and outside that time).
inline double epoch_train_seconds(Trainer& trainer, int batch) {
  const EpochMetrics m = trainer.run_epoch({});
  return static_cast<double>(trainer.steps_per_epoch() * batch) / m.samples_per_s;
}

}  // namespace strata::bench
