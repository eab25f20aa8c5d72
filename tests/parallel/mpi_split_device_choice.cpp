// Where a split model's shards train is decided by all M together: on a machine without GPUs,
// run.device cuda fails on every shard with the same message (none waits in a collective the
// others never reach), and auto trains every shard on the CPU.
#include <catch2/catch.hpp>

#include <string>

#include "core/device.hpp"
#include "core/errors.hpp"
#include "jobs/group_training.hpp"
#include "parallel/planner.hpp"
#include "parallel/topology.hpp"

using namespace strata;

TEST_CASE("a split model's shards choose their device together", "[mpi][model_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator pair = world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "pair");
  // Without a GPU anywhere: what a machine with one would do is the gpu tests' part.
  const int gpus_here = world.allreduce_max(detect_devices().cuda_devices);
  if (world.rank() < 2 && gpus_here == 0) {
    Config config = parse_config(R"(run: {name: split_device, seed: 3}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 64, test: 16, classes: 4, channels: 1, height: 6, width: 6}
model:
  layers:
    - flatten
    - dense: {units: 8, split: column}
    - relu
    - dense: {units: 4, split: row}
training: {epochs: 1, local_batch: 16, optimizer: {type: sgd, lr: 0.05}}
)",
                                 "split_device.yaml");
    PlanRequest request;
    request.world_size = 2;
    request.local_batch = 16;
    request.fixed_model = 2;
    const Plan plan = make_plan(request);
    REQUIRE(plan.model == 2);
    const Topology topology(pair, plan);
    const TrainingData data = load_training_data(config);

    config.run.device = DeviceChoice::cuda;
    std::string message;
    try {
      GroupTraining training(config, data, topology, plan, 1);
    } catch (const ConfigError& e) {
      message = e.what();
    }
    // A build without CUDA says so on every rank alike.
    CHECK_THAT(message,
               Catch::Contains(built_with_cuda()
                                   ? "split over M = 2 ranks and 2 of the 2 shards have no GPU"
                                   : "built without CUDA"));
    // Both shards reached the same verdict (and neither is left waiting).
    const auto messages = pair.allgather_strings(message);
    CHECK(messages[0] == messages[1]);

    config.run.device = DeviceChoice::automatic;
    GroupTraining training(config, data, topology, plan, 1);
    CHECK(training.gpu == nullptr);
  }
  world.barrier();
}
