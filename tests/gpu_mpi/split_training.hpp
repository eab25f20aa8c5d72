// What the split-model GPU tests share: a small model with every kind of split, and the check
// that a GPU training's state is the CPU's within 1e-4 relative.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/state.hpp"

namespace strata::testing {

// A conv split by output channel (gathered), a column -> row dense pair (the row layer reads the
// column layer's slice), and an unsplit head; local batch 16, `data` replicas, `accumulate`
// micro-batches per step.
inline Config split_config(const char* optimizer, int accumulate, int data) {
  Config config =
      parse_config(fmt::format(R"(run: {{name: mp, seed: 5}}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {{train: 512, test: 64, classes: 4, channels: 1, height: 10, width: 10}}
model:
  layers:
    - conv2d: {{filters: 8, kernel: 3, init: glorot, split: column}}
    - relu
    - maxpool2d: {{size: 2}}
    - flatten
    - dense: {{units: 24, init: glorot, split: column}}
    - tanh
    - dense: {{units: 16, init: glorot, split: row}}
    - relu
    - dense: {{units: 4, init: glorot}}
training:
  epochs: 1
  local_batch: 16
  optimizer: {{type: {}, lr: 0.01{}}}
parallel: {{lr_scaling: none, accumulate: {}, max_global_batch: {}}}
)",
                               optimizer, std::string(optimizer) == "sgd" ? ", momentum: 0.9" : "",
                               accumulate, 16 * data * accumulate),
                   "mp_gpu.yaml");
  return config;
}

// The CPU's and the GPU's weights and moments agree within 1e-4 relative.
inline void check_close(const StateDict& cpu, const StateDict& gpu) {
  int compared = 0;
  for (const auto& [key, t] : cpu.tensors()) {
    INFO(key);
    const auto& other = gpu.tensor(key).values;
    REQUIRE(other.size() == t.values.size());
    for (std::size_t i = 0; i < other.size(); ++i) {
      const double scale = std::max(1.0, std::fabs(static_cast<double>(t.values[i])));
      CHECK(std::fabs(static_cast<double>(other[i]) - t.values[i]) / scale < 1e-4);
      ++compared;
    }
  }
  CHECK(compared > 1000);
}

}  // namespace strata::testing
