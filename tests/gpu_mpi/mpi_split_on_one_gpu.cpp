// The split layers' device code on a machine with one GPU: two ranks, the M = 2 shards of one
// model, share it, their collectives staged through host memory over MPI (NCCL refuses two ranks
// on one GPU). SGD and Adam, one micro-batch per step and two, against the same split on the CPUs.
#include <catch2/catch.hpp>

#include <memory>
#include <span>
#include <vector>

#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_model.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "parallel/planner.hpp"
#include "parallel/topology.hpp"
#include "tests/gpu_mpi/split_training.hpp"
#include "tests/parallel/trainer_steps.hpp"

using namespace strata;

namespace {

// ShardCollectives through host memory: each waits for the compute stream, copies to the host,
// runs the MPI collective and copies back.
class MpiStagedShards final : public cuda::ShardCollectives {
 public:
  explicit MpiStagedShards(const Communicator& shards) : shards_(shards) {}
  int shard() const override { return shards_.rank(); }
  int shards() const override { return shards_.size(); }
  void sum(float* values, std::size_t count, const cuda::Stream& compute) override {
    std::vector<float> host = to_host(values, count, compute);
    shards_.allreduce_sum(std::span<float>(host));
    to_device(host, values, compute);
  }
  void allgather(const float* mine, float* all, std::size_t count,
                 const cuda::Stream& compute) override {
    const std::vector<float> host = to_host(mine, count, compute);
    std::vector<float> gathered(count * static_cast<std::size_t>(shards_.size()));
    shards_.allgather(host, gathered);
    to_device(gathered, all, compute);
  }
  void wait(const cuda::Stream& compute) override { compute.synchronize(); }

 private:
  static std::vector<float> to_host(const float* device, std::size_t count,
                                    const cuda::Stream& compute) {
    std::vector<float> host(count);
    cuda::check(cudaMemcpyAsync(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost,
                                compute.get()),
                "cudaMemcpyAsync to the host");
    compute.synchronize();
    return host;
  }
  static void to_device(const std::vector<float>& host, float* device,
                        const cuda::Stream& compute) {
    cuda::check(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                cudaMemcpyHostToDevice, compute.get()),
                "cudaMemcpyAsync to the device");
    compute.synchronize();  // `host` dies on return
  }

  const Communicator& shards_;
};

Trainer split_trainer(const Config& config, const TrainingData& data, const Topology& topology,
                      const Plan& plan) {
  return Trainer(config, build_model(config, data, model_parallel_factory(topology.model(), "mp")),
                 data, plan, 1);
}

}  // namespace

TEST_CASE("split layers on one shared GPU follow the same split on the CPUs",
          "[gpu][model_parallel]") {
  const Communicator world = Communicator::world();
  const Communicator pair = world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "pair");
  for (const char* optimizer : {"sgd", "adam"})
    for (const int accumulate : {1, 2}) {
      if (world.rank() >= 2) break;
      INFO(optimizer << ", accumulate " << accumulate);
      const Config config = strata::testing::split_config(optimizer, accumulate, 1);
      PlanRequest request;
      request.world_size = 2;
      request.local_batch = 16;
      request.max_global_batch = 16 * accumulate;
      request.accumulate = accumulate;
      request.fixed_model = 2;
      const Plan plan = make_plan(request);
      REQUIRE(plan.model == 2);
      const Topology topology(pair, plan);
      const TrainingData data = load_training_data(config);

      Trainer cpu = split_trainer(config, data, topology, plan);
      strata::testing::train_until(cpu, 6);
      const StateDict on_cpu = strata::testing::whole_state(cpu, topology);

      Trainer gpu = split_trainer(config, data, topology, plan);
      cuda::GpuGradients engine(gpu.model(), config.layers, config.training.optimizer,
                                cuda::bind_rank_to_device(0),
                                std::make_unique<MpiStagedShards>(topology.model()));
      gpu.set_gradient_engine(&engine);
      CHECK(gpu.steps_on_engine());
      CHECK_THAT(engine.where(),
                 Catch::Contains("model shard " + std::to_string(pair.rank()) + " of 2"));
      strata::testing::train_until(gpu, 6);
      strata::testing::check_close(on_cpu, strata::testing::whole_state(gpu, topology));
    }
  world.barrier();
}
