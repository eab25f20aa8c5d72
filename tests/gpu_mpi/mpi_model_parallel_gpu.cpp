// A model split over M = 2 shards trained on GPUs (the split layers' collectives on NCCL) against
// the same split training on the CPUs (over MPI), one GPU per rank: SGD and Adam, one micro-batch
// per step and two; on 4 ranks also D = 2 x M = 2.
#include <catch2/catch.hpp>

#include "core/config.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "jobs/training_session.hpp"
#include "parallel/planner.hpp"
#include "parallel/topology.hpp"
#include "tests/gpu_mpi/split_training.hpp"
#include "tests/parallel/trainer_steps.hpp"

using namespace strata;
using strata::testing::check_close;
using strata::testing::split_config;

namespace {

// Trains 6 steps on `device` and returns the replica's whole state (gathered over the shards).
StateDict trained(Config config, DeviceChoice device, const Topology& topology, const Plan& plan) {
  config.run.device = device;
  const TrainingData data = load_training_data(config);
  GroupTraining training(config, data, topology, plan, 1);
  if (device == DeviceChoice::cuda) {
    REQUIRE(training.gpu != nullptr);
    // The step, the optimizer included, runs on the GPU: NCCL sums any replicas.
    CHECK(training.trainer->steps_on_engine());
    CHECK_THAT(training.gpu->where(), Catch::Contains("model shard"));
  } else {
    CHECK(training.gpu == nullptr);
  }
  strata::testing::train_until(*training.trainer, 6);
  return strata::testing::whole_state(*training.trainer, topology);
}

void compare_layout(const Communicator& ranks, int data) {
  for (const char* optimizer : {"sgd", "adam"})
    for (const int accumulate : {1, 2}) {
      INFO(optimizer << ", accumulate " << accumulate << ", D = " << data);
      const Config config = split_config(optimizer, accumulate, data);
      PlanRequest request;
      request.world_size = ranks.size();
      request.local_batch = 16;
      request.max_global_batch = 16 * data * accumulate;
      request.accumulate = accumulate;
      request.fixed_model = 2;
      const Plan plan = make_plan(request);
      REQUIRE(plan.model == 2);
      REQUIRE(plan.data == data);
      const Topology topology(ranks, plan);
      const StateDict cpu = trained(config, DeviceChoice::cpu, topology, plan);
      const StateDict gpu = trained(config, DeviceChoice::cuda, topology, plan);
      check_close(cpu, gpu);
    }
}

}  // namespace

TEST_CASE("an M=2 model trained on two GPUs follows the same split on the CPUs",
          "[gpu][model_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator pair = world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "pair");
  if (world.rank() < 2) compare_layout(pair, 1);
  world.barrier();
}

TEST_CASE("D=2 x M=2 on four GPUs follows the same layout on the CPUs", "[gpu][model_parallel]") {
  const Communicator world = Communicator::world();
  if (world.size() != 4) return;  // this layout needs exactly 4 ranks (gpu_model_parallel_n4)
  compare_layout(world, 2);
}
