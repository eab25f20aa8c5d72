// A data-parallel training on GPUs whose gradients NCCL sums (and whose optimizer then steps on
// the GPU), against the same training summed by MPI on the host, one GPU per rank, with one
// micro-batch per step and with two.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/config.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "jobs/training_session.hpp"
#include "parallel/planner.hpp"
#include "parallel/topology.hpp"
#include "tests/parallel/trainer_steps.hpp"

using namespace strata;

TEST_CASE("a D=2 GPU training summed by NCCL ends as one summed by MPI", "[gpu][nccl]") {
  const Communicator world = Communicator::world();
  const Communicator pair = world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "pair");
  // accumulate: 2 sums each step's two micro-batches on the device, then over the replicas once.
  for (const int accumulate : {1, 2}) {
    if (world.rank() >= 2) break;
    INFO("accumulate " << accumulate);
    Config config = strata::testing::two_replica_config();
    config.run.device = DeviceChoice::cuda;
    config.parallel.accumulate = accumulate;
    config.parallel.max_global_batch = 32 * accumulate;
    const TrainingData data = load_training_data(config);
    PlanRequest request;
    request.world_size = 2;
    request.local_batch = 16;
    request.max_global_batch = 32 * accumulate;
    request.accumulate = accumulate;
    const Plan plan = make_plan(request);
    REQUIRE(plan.data == 2);
    REQUIRE(plan.accumulate == accumulate);
    const Topology topology(pair, plan);
    std::vector<StateDict> states;
    for (const AllreduceKind kind :
         {AllreduceKind::mpi, AllreduceKind::nccl, AllreduceKind::automatic}) {
      config.parallel.allreduce = kind;
      GroupTraining training(config, data, topology, plan, 1);
      REQUIRE(training.gpu != nullptr);
      // auto takes NCCL: both replicas train on GPUs of their own.
      CHECK(training.gpu->sums_over_replicas() == (kind != AllreduceKind::mpi));
      // Summed on the GPUs, the optimizer steps there too; summed by MPI, on the host.
      CHECK(training.trainer->steps_on_engine() == (kind != AllreduceKind::mpi));
      strata::testing::train_until(*training.trainer, 6);
      states.push_back(strata::testing::whole_state(*training.trainer, topology));
    }
    // Two ranks: NCCL's a + b is MPI's, but the device's optimizer rounds as the host's only up
    // to contraction, which six steps of momentum carry on; within 1e-5 relative. auto is nccl.
    int compared = 0;
    for (const auto& [key, t] : states[0].tensors()) {
      INFO(key);
      CHECK(states[2].tensor(key).values == states[1].tensor(key).values);
      const auto& other = states[1].tensor(key).values;
      REQUIRE(other.size() == t.values.size());
      for (std::size_t i = 0; i < other.size(); ++i) {
        const double scale = std::max(1.0, std::fabs(static_cast<double>(t.values[i])));
        CHECK(std::fabs(static_cast<double>(other[i]) - t.values[i]) / scale < 1e-5);
        ++compared;
      }
    }
    CHECK(compared > 1000);
  }
  world.barrier();
}
