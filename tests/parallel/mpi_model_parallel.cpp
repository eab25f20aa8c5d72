// Model parallelism is the serial computation: M=2 shards (a column->row dense pair and a conv
// split by output channel) give the loss and gradients of M=1, each shard holding half of the split
// weights; and D=2 x M=2 on 4 ranks trains to the weights of 1 rank.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/loss.hpp"
#include "core/trainer.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "parallel/topology.hpp"

using namespace strata;

namespace {

const char* const split_model_yaml = R"(run: {name: mp, seed: 5}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 512, test: 64, classes: 4, channels: 1, height: 10, width: 10}
model:
  layers:
    - conv2d: {filters: 32, kernel: 3, init: glorot, split: column}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 24, init: glorot, split: column}
    - tanh
    - dense: {units: 16, init: glorot, split: row}
    - relu
    - dense: {units: 4, init: glorot}
training:
  epochs: 1
  local_batch: 64
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
parallel: {lr_scaling: none}
)";

// Which slice of the unsplit parameter a shard holds: rows [first, first+count) of a
// [rows, width] view, or for a row split, columns [first, first+count) of every row.
struct Slice {
  bool by_column = false;
  std::int64_t width = 1, first = 0, count = 0;
};

std::vector<float> take(const Tensor& whole, const Slice& s) {
  std::vector<float> out;
  if (!s.by_column)
    return {whole.data() + s.first * s.width, whole.data() + (s.first + s.count) * s.width};
  for (std::int64_t r = 0; r < whole.size() / s.width; ++r)
    out.insert(out.end(), whole.data() + r * s.width + s.first,
               whole.data() + r * s.width + s.first + s.count);
  return out;
}

// The slice of each of the serial model's parameters that shard m of 2 holds, in params() order.
std::vector<Slice> shard_slices(int m) {
  return {
      {false, 1 * 3 * 3, 16 * m, 16},
      {false, 1, 16 * m, 16},  // conv weight rows, bias
      {false, 512, 12 * m, 12},
      {false, 1, 12 * m, 12},  // column dense: rows of [24, 512]
      {true, 24, 12 * m, 12},
      {false, 1, 0, 16},  // row dense: columns of [16, 24]; whole bias
      {false, 16, 0, 4},
      {false, 1, 0, 4},  // last dense: not split
  };
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0, scale = 1e-6;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

std::vector<float> values(const Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

}  // namespace

TEST_CASE("M=2 gives the loss and gradients of M=1", "[mpi][model_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator model = world.split(world.rank() / 2, world.rank(), "model");
  REQUIRE(model.size() == 2);
  const Config config = parse_config(split_model_yaml, "mp.yaml");
  Model serial(config.layers, {1, 10, 10}, 4, 77, config.file);
  Model split(config.layers, {1, 10, 10}, 4, 77, config.file,
              model_parallel_factory(model, config.file));
  CHECK(std::string(split.layer(0).kind()) == "conv2d/column");

  // The same draws made both models: each shard holds its slice of the serial weights.
  auto serial_params = serial.params(), split_params = split.params();
  REQUIRE(serial_params.size() == split_params.size());
  const auto slices = shard_slices(model.rank());
  for (std::size_t k = 0; k < serial_params.size(); ++k) {
    INFO(serial_params[k].name);
    CHECK(values(*split_params[k].value) == take(*serial_params[k].value, slices[k]));
  }

  Rng rng(3);
  Tensor x({6, 1, 10, 10});
  for (auto& v : x.values()) v = rng.normal();
  std::vector<std::int32_t> labels{0, 1, 2, 3, 1, 2};
  Tensor g_serial, g_split;
  const double loss_serial = softmax_cross_entropy(serial.forward(x, true), labels, g_serial);
  const double loss_split = softmax_cross_entropy(split.forward(x, true), labels, g_split);
  WARN("loss M=1 " << loss_serial << ", M=2 " << loss_split);
  CHECK(loss_split == Approx(loss_serial).epsilon(1e-5));
  serial.backward(x, g_serial);
  split.backward(x, g_split);
  for (std::size_t k = 0; k < serial_params.size(); ++k) {
    const double worst =
        worst_difference(values(*split_params[k].grad), take(*serial_params[k].grad, slices[k]));
    INFO(serial_params[k].name << ": largest gradient difference relative to the largest gradient "
                               << worst);
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("with M=2 each rank holds half of the split layers' weights", "[mpi][model_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator model = world.split(world.rank() / 2, world.rank(), "model");
  const Config config = parse_config(split_model_yaml, "mp.yaml");
  Model serial(config.layers, {1, 10, 10}, 4, 77, config.file);
  Model split(config.layers, {1, 10, 10}, 4, 77, config.file,
              model_parallel_factory(model, config.file));
  auto serial_params = serial.params(), split_params = split.params();
  std::int64_t serial_split_bytes = 0, shard_split_bytes = 0;
  for (std::size_t k :
       {0u, 1u, 2u, 3u, 4u}) {  // the split tensors (the row layer's bias stays whole)
    serial_split_bytes += serial_params[k].value->size() * 4;
    shard_split_bytes += split_params[k].value->size() * 4;
  }
  WARN("split layers' weights: " << serial_split_bytes << " bytes at M=1, " << shard_split_bytes
                                 << " per rank at M=2");
  CHECK(shard_split_bytes * 2 == serial_split_bytes);
  CHECK(split.parameter_count() < serial.parameter_count());
}

TEST_CASE("D=2 x M=2 on 4 ranks trains to the weights of 1 rank", "[mpi][model_parallel]") {
  const Communicator world = Communicator::world();
  if (world.size() != 4) return;  // this decomposition needs exactly 4 ranks
  PlanRequest request;
  request.world_size = 4;
  request.local_batch = 32;
  request.max_global_batch = 64;
  request.fixed_model = 2;
  const Plan plan = make_plan(request);
  REQUIRE(plan.data == 2);
  const Topology topology(world, plan);

  Config parallel_config = parse_config(split_model_yaml, "mp.yaml");
  parallel_config.training.local_batch = 32;
  const Config serial_config = parse_config(split_model_yaml, "mp.yaml");  // batch 64, one rank
  const TrainingData data = load_training_data(serial_config);

  Trainer serial(serial_config, build_model(serial_config, data), data,
                 standalone_plan(serial_config), 1);
  serial.run_epoch({});
  DataParallelSync sync(topology.data(), 25.0);
  Trainer parallel(
      parallel_config,
      build_model(parallel_config, data, model_parallel_factory(topology.model(), "mp.yaml")), data,
      plan, 1, &sync);
  sync.attach(parallel.model().params());
  parallel.run_epoch({});

  auto serial_params = serial.model().params(), parallel_params = parallel.model().params();
  const auto slices = shard_slices(topology.coords().model);
  double worst = 0.0;
  for (std::size_t k = 0; k < serial_params.size(); ++k)
    worst = std::max(worst, worst_difference(values(*parallel_params[k].value),
                                             take(*serial_params[k].value, slices[k])));
  WARN("D=2 x M=2, 8 steps: largest weight difference relative to the largest weight " << worst);
  CHECK(worst < 1e-5);
}
