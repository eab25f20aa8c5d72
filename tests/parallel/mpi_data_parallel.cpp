// Data parallelism is the serial computation: D replicas of local batch b give the weights one rank
// gets with batch D*b, up to float summation order; and the same run twice gives the same bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <unistd.h>

#include <fmt/format.h>

#include "core/trainer.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/topology.hpp"

using namespace strata;

namespace {

Config small_cnn_config(int local_batch) {
  const std::string yaml = R"(run: {name: dp, seed: 11}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 512, test: 64, classes: 4, channels: 1, height: 10, width: 10}
model:
  layers:
    - conv2d: {filters: 16, kernel: 3, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 12, init: glorot}
    - tanh
    - dense: {units: 4, init: glorot}
training:
  epochs: 1
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
parallel: {lr_scaling: none}
)";
  Config c = parse_config(yaml, "dp.yaml");
  c.training.local_batch = local_batch;
  return c;
}

std::vector<float> flat_weights(Model& model) {
  std::vector<float> all;
  for (const auto& p : model.params())
    all.insert(all.end(), p.value->values().begin(), p.value->values().end());
  return all;
}

// Trains one epoch (8 steps of global batch 64) on `threads` workers and returns the weights.
std::vector<float> train_epoch(const Config& config, const Communicator* data, double bucket_mib,
                               int threads = 1) {
  const TrainingData set = load_training_data(config);
  std::optional<DataParallelSync> sync;
  if (data != nullptr) sync.emplace(*data, bucket_mib);
  Trainer trainer(config, build_model(config, set), set,
                  standalone_plan(config, sync ? sync->replicas() : 1), threads,
                  sync ? &*sync : nullptr);
  if (sync) sync->attach(trainer.model().params());
  trainer.run_epoch({});
  return flat_weights(trainer.model());
}

// The largest difference relative to the largest weight: per-element ratios of weights near zero
// would measure float rounding, not the algorithm.
double largest_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("D=2 replicas of batch b give the weights of one rank with batch 2b",
          "[mpi][data_parallel]") {
  const Communicator world = Communicator::world();
  // Pairs of neighbouring ranks form the data communicators, as the layout does for M=1, D=2.
  const Communicator data = world.split(world.rank() / 2, world.rank(), "data");
  REQUIRE(data.size() == 2);
  const auto serial = train_epoch(small_cnn_config(64), nullptr, 0.0);
  for (double bucket_mib : {0.0, 0.005, 25.0}) {
    const auto parallel = train_epoch(small_cnn_config(32), &data, bucket_mib);
    const double worst = largest_relative_difference(parallel, serial);
    WARN("bucket_mib " << bucket_mib << ": largest relative weight difference after 8 steps "
                       << worst);
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("D=2 replicas accumulating K=2 micro-batches of b equal one rank with batch 4b",
          "[mpi][data_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator data = world.split(world.rank() / 2, world.rank(), "data");
  const auto serial = train_epoch(small_cnn_config(64), nullptr, 0.0);
  Config accumulating = small_cnn_config(16);
  accumulating.parallel.accumulate = 2;
  const auto parallel = train_epoch(accumulating, &data, 0.005);
  const double worst = largest_relative_difference(parallel, serial);
  WARN("D=2 x K=2 x b=16 against b=64: largest relative weight difference after 8 steps " << worst);
  CHECK(worst < 1e-5);
}

TEST_CASE("replicas on different thread counts start the same buckets in the same order",
          "[mpi][data_parallel]") {
  // One worker hands each layer's gradients on as backward finishes it, two report them all after
  // backward; both orders must complete the buckets alike. Here (bucket_mib 0.005) the dense
  // weight's bucket would otherwise complete before the small gradients' on one replica and after
  // it on the other, and the two non-blocking allreduces would pair up wrongly.
  const Communicator world = Communicator::world();
  const Communicator data = world.split(world.rank() / 2, world.rank(), "data");
  const auto serial = train_epoch(small_cnn_config(64), nullptr, 0.0);
  const auto mixed = train_epoch(small_cnn_config(32), &data, 0.005, 1 + data.rank());
  const double worst = largest_relative_difference(mixed, serial);
  WARN("1 and 2 worker threads: largest relative weight difference after 8 steps " << worst);
  CHECK(worst < 1e-5);
}

TEST_CASE("D=2 replicas whose workers split an MLP's units equal one rank with batch 2b",
          "[mpi][data_parallel][unit_split]") {
  // The conv's place taken by a dense layer: the model's only parameters are dense layers', and
  // each replica's two workers split their units.
  const auto mlp_config = [](int local_batch) {
    Config c = small_cnn_config(local_batch);
    c.layers.erase(c.layers.begin(), c.layers.begin() + 3);  // conv, relu, pool
    // flatten, dense 40, tanh, dense 12, tanh, dense 4
    const std::vector<LayerSpec> dense_and_tanh(c.layers.begin() + 1, c.layers.begin() + 3);
    c.layers.insert(c.layers.begin() + 1, dense_and_tanh.begin(), dense_and_tanh.end());
    c.layers[1].name = "dense_wide";
    c.layers[1].units = 40;
    c.layers[2].name = "tanh_wide";
    c.run.thread_split = ThreadSplit::units;  // the trainer refuses it where it cannot split
    return c;
  };
  const Communicator world = Communicator::world();
  const Communicator data = world.split(world.rank() / 2, world.rank(), "data");
  const auto serial = train_epoch(mlp_config(64), nullptr, 0.0);
  for (double bucket_mib : {0.0, 25.0}) {
    const auto split = train_epoch(mlp_config(32), &data, bucket_mib, 2);
    const double worst = largest_relative_difference(split, serial);
    WARN("bucket_mib " << bucket_mib << ", units split over 2 workers: largest relative weight "
                       << "difference after 8 steps " << worst);
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("the same config and decomposition give bit-identical weights", "[mpi][data_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator data = world.split(0, world.rank(), "data");  // every rank is a replica
  const auto first = train_epoch(small_cnn_config(16), &data, 0.005);
  const auto second = train_epoch(small_cnn_config(16), &data, 0.005);
  CHECK(first == second);
  // Every replica ends with the same weights: compare against rank 0's.
  std::vector<float> root = first;
  data.broadcast(root, 0);
  CHECK(root == first);
}

TEST_CASE("buckets follow bucket_mib", "[mpi][data_parallel]") {
  const Communicator world = Communicator::world();
  Config config = small_cnn_config(16);
  const TrainingData set = load_training_data(config);
  Trainer trainer(config, build_model(config, set), set, standalone_plan(config), 1);
  const auto params =
      trainer.model().params();  // 6 tensors, 3296 floats, the largest the 256x12 dense weight
  DataParallelSync per_tensor(world, 0.0), one_bucket(world, 25.0), small(world, 0.005);
  per_tensor.attach(params);
  one_bucket.attach(params);
  small.attach(params);
  CHECK(per_tensor.bucket_count() == params.size());
  CHECK(one_bucket.bucket_count() == 1);
  CHECK(small.bucket_count() > 1);
  CHECK(small.bucket_count() < params.size());
}

TEST_CASE("each data rank reads only its shard of every global batch from the file",
          "[mpi][data_parallel][shards]") {
  const Communicator world = Communicator::world();
  const Communicator data = world.split(world.rank() / 2, world.rank(), "data");
  std::string path;
  if (world.rank() == 0) {
    path = fmt::format("/tmp/strata-mpi-shards-{}.h5", ::getpid());
    SyntheticSpec spec;
    spec.train = 512;
    spec.test = 64;
    spec.classes = 4;
    spec.height = 10;
    spec.width = 10;
    write_dataset(path, make_synthetic(spec, 6));
  }
  world.broadcast_string(path, 0);
  Config memory_config = small_cnn_config(32);
  memory_config.data.source = DataSource::hdf5;
  memory_config.data.path = path;
  Config shard_config = memory_config;
  shard_config.data.read = DataRead::shards;
  const TrainingData in_memory = load_training_data(memory_config),
                     sharded = load_training_data(shard_config);

  std::vector<std::vector<float>> weights;
  for (const TrainingData* set : {&in_memory, &sharded}) {
    DataParallelSync sync(data, 25.0);
    const Config& config = set == &in_memory ? memory_config : shard_config;
    Trainer trainer(config, build_model(config, *set), *set,
                    standalone_plan(config, sync.replicas()), 1, &sync);
    sync.attach(trainer.model().params());
    trainer.run_epoch({});
    weights.push_back(flat_weights(trainer.model()));
    if (set == &sharded) CHECK(sharded.train.reader->rows_read() == trainer.steps_per_epoch() * 32);
  }
  CHECK(weights[0] == weights[1]);
  world.barrier();
  if (world.rank() == 0) std::remove(path.c_str());
}
