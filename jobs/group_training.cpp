#include "jobs/group_training.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/config_names.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "jobs/fault_injection.hpp"
#include "parallel/failure_agreement.hpp"
#include "parallel/model_parallel_layers.hpp"

#ifdef STRATA_HAVE_CUDA
#include "cuda/cuda_check.hpp"
#include "cuda/device_model.hpp"
#include "cuda/model_shards.hpp"
#include "cuda/replica_sum.hpp"
#endif

namespace strata {

namespace {

// Whether the group's replicas sum their gradients with NCCL on their GPUs: under
// parallel.allreduce auto when every replica trains on a GPU of its own, and always under nccl,
// where a replica on the CPU or two on one GPU (which NCCL refuses) is an error. `gpu` is this
// rank's device_identity, empty on the CPU. Collective over the group's replicas when D > 1 in a
// build with CUDA, so that all decide alike.
bool sums_over_nccl(const Config& config, const Topology& topology, const Plan& plan,
                    const std::string& gpu) {
  const AllreduceKind kind = config.parallel.allreduce;
  if (plan.data < 2 || !built_with_cuda() || config.run.device == DeviceChoice::cpu ||
      (kind != AllreduceKind::automatic && kind != AllreduceKind::nccl))
    return false;
  auto gpus = topology.data().allgather_strings(gpu);
  const auto on_cpu = std::count(gpus.begin(), gpus.end(), std::string());
  std::sort(gpus.begin(), gpus.end());
  const auto shared = std::adjacent_find(
      gpus.begin(), gpus.end(), [](const auto& a, const auto& b) { return !a.empty() && a == b; });
  if (kind == AllreduceKind::nccl && on_cpu > 0)
    throw ConfigError(fmt::format(
        "parallel.allreduce: nccl needs every data-parallel replica on a GPU, but {} of the "
        "group's {} train on the CPU (run.device {}); use auto or mpi",
        on_cpu, plan.data, to_string(config.run.device)));
  if (kind == AllreduceKind::nccl && shared != gpus.end())
    throw ConfigError(fmt::format(
        "parallel.allreduce: nccl needs a GPU of its own for every data-parallel replica, but "
        "two of the group's {} share GPU {} (more ranks on a node than GPUs?); use auto or mpi",
        plan.data, *shared));
  return on_cpu == 0 && shared == gpus.end();
}

#ifdef STRATA_HAVE_CUDA
// A stalled gradient sum is reported as a stalled MPI call is, every parallel.watchdog_s, and
// ended at three times that with ncclCommAbort: the rank then fails like one whose MPI call
// failed, where MPI could only go on waiting.
cuda::NcclWatch nccl_watch(const Config& config) {
  cuda::NcclWatch watch;
  watch.report_s = config.parallel.watchdog_s;
  watch.abort_s = 3.0 * config.parallel.watchdog_s;
  return watch;
}

// Whether a model split over the M shards of `shards` trains on their GPUs: only when every shard
// has a GPU of its own (`gpu`, device_identity, empty on the CPU), since the split layers' NCCL
// collectives need all M and NCCL refuses two on one GPU. `auto` otherwise trains every shard on
// the CPU; `cuda` is a ConfigError. Collective over `shards`: all decide alike.
bool shards_on_gpus(const Config& config, const Communicator& shards, const std::string& gpu) {
  // Every shard reads the same config, so all return here or none does.
  if (config.run.device == DeviceChoice::cpu) return false;
  auto gpus = shards.allgather_strings(gpu);
  const auto on_cpu = std::count(gpus.begin(), gpus.end(), std::string());
  std::sort(gpus.begin(), gpus.end());
  const bool shared =
      std::adjacent_find(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) {
        return !a.empty() && a == b;
      }) != gpus.end();
  if (on_cpu == 0 && !shared) return true;
  const std::string why =
      on_cpu > 0 ? fmt::format("{} of the {} shards have no GPU", on_cpu, shards.size())
                 : fmt::format("two of the {} shards share a GPU (more ranks on a node than GPUs?)",
                               shards.size());
  if (config.run.device == DeviceChoice::cuda)
    throw ConfigError(fmt::format(
        "run.device: cuda, but the model is split over M = {} ranks and {}; the split layers "
        "need a GPU of their own on every shard",
        shards.size(), why));
  // Where no shard has a GPU, auto means the CPU and there is nothing to warn of; GPUs that some
  // shards have and all leave unused are worth a line.
  if (shards.rank() == 0 && on_cpu < static_cast<std::ptrdiff_t>(gpus.size()))
    fmt::print(stderr,
               "warning: run.device auto: the model is split over M = {} ranks and {}; all train "
               "on the CPU\n",
               shards.size(), why);
  return false;
}

// This rank's training on its GPU, or null where it trains on the CPU: a GPU that cannot take the
// model leaves it on the CPU under `auto` and throws under `cuda`. The M shards of a split model
// agree over `model` (collective), so that all train on GPUs or all on the CPU.
std::unique_ptr<cuda::GpuGradients> gpu_training(const Config& config, const Topology& topology,
                                                 const Plan& plan, int device, Model& host) {
  std::string failure;
  std::unique_ptr<cuda::GpuGradients> on_device;
  try {
    std::unique_ptr<cuda::ShardCollectives> shards;
    if (plan.model > 1)
      shards = std::make_unique<cuda::NcclShardCollectives>(topology.model(), nccl_watch(config));
    on_device = std::make_unique<cuda::GpuGradients>(host, config.layers, config.training.optimizer,
                                                     device, std::move(shards));
  } catch (const std::exception& e) {
    // Any failure here (CUDA's, NCCL's, memory) is this rank's: the shards must hear of it.
    if (plan.model == 1 && (config.run.device == DeviceChoice::cuda ||
                            dynamic_cast<const cuda::CudaError*>(&e) == nullptr))
      throw;
    failure = e.what();
  }
  if (plan.model > 1) {
    const auto failures = topology.model().allgather_strings(failure);
    for (std::size_t m = 0; m < failures.size() && failure.empty(); ++m)
      if (!failures[m].empty()) failure = fmt::format("model shard {}: {}", m, failures[m]);
  }
  if (failure.empty()) return on_device;
  if (config.run.device == DeviceChoice::cuda) throw cuda::CudaError(failure);
  fmt::print(stderr,
             "warning: run.device auto: the GPU cannot train this model ({}); training on the "
             "CPU\n",
             failure);
  return nullptr;
}
#endif

}  // namespace

std::string trainings_device(const Config& config) {
  if (config.run.device == DeviceChoice::cpu) return "on the CPU";
  // auto's decision for both auto and cuda: cuda without a GPU fails on every rank when the
  // training is built, not on this rank alone while it prints.
  const DeviceReport devices = detect_devices();
  if (!trains_on_gpu(DeviceChoice::automatic, devices)) return "on the CPU";
  return fmt::format("on GPUs (run.device {}; this node: {})", to_string(config.run.device),
                     devices.detail);
}

GroupTraining::GroupTraining(const Config& config, const TrainingData& data,
                             const Topology& topology, const Plan& plan, int threads,
                             Trace* trace) {
  // Collective over the group's replicas, which all reach it with the same plan and config.
  const bool shared =
      plan.data > 1 &&
      sums_through_window(config.parallel.allreduce,
                          topology.data().allreduce_min(topology.data_node().size()),
                          topology.data().allreduce_max(topology.data_node().size()));
  if (shared)
    shared_sync.emplace(topology.data(), topology.data_node(), topology.data_across());
  else if (plan.data > 1)
    sync.emplace(topology.data(), config.parallel.bucket_mib);
  GradientSync* gradients = sync          ? static_cast<GradientSync*>(&*sync)
                            : shared_sync ? static_cast<GradientSync*>(&*shared_sync)
                                          : nullptr;
  // Each rank decides for itself, the M shards of a split model together. What can fail on one
  // rank alone (its GPU, its memory) is agreed on over the group before the next collective, so
  // that every rank throws alike: a search's trial guard then fails the trial on all of them.
  const Communicator& group = topology.member();
  bool on_gpu = false;
#ifdef STRATA_HAVE_CUDA
  int device = -1;
  std::string gpu_identity;  // which physical GPU (device_identity)
  agree_on_failure(group, [&] {
    try {
      on_gpu = trains_on_gpu(config.run.device, detect_devices());
    } catch (const ConfigError& e) {
      // The shards of a split model fail together below (shards_on_gpus), not this one alone.
      if (plan.model == 1) throw;
      fmt::print(stderr, "strata: {}\n", e.what());
    }
    if (!on_gpu) return;
    try {
      device =
          cuda::bind_rank_to_device(node_local_rank(topology.world_rank() % plan.ranks_per_node));
      gpu_identity = cuda::device_identity(device);
    } catch (const cuda::CudaError& e) {
      if (config.run.device == DeviceChoice::cuda && plan.model == 1) throw;
      fmt::print(stderr, "warning: run.device {}: this rank's GPU cannot be used ({})\n",
                 to_string(config.run.device), e.what());
      on_gpu = false;
    }
  });
  // The model groups of a replica set may decide differently (a node without GPUs).
  agree_on_failure(group, [&] {
    if (plan.model > 1)
      on_gpu = shards_on_gpus(config, topology.model(), on_gpu ? gpu_identity : std::string());
  });
#else
  on_gpu = trains_on_gpu(config.run.device, detect_devices());
#endif
  const auto make_trainer = [&](int worker_threads) {
    inject_build_fault(BuildFault::in_build, topology.world_rank());
    trainer.emplace(
        config,
        build_model(config, data,
                    plan.model > 1 ? model_parallel_factory(topology.model(), config.file)
                                   : LayerFactory{}),
        data, plan, worker_threads, gradients);
  };
  agree_on_failure(group, [&] { make_trainer(on_gpu ? 1 : threads); });
  bool nccl_sums = false;
#ifdef STRATA_HAVE_CUDA
  std::unique_ptr<cuda::GpuGradients> on_device;
  agree_on_failure(group, [&] {
    if (!on_gpu) return;
    on_device = gpu_training(config, topology, plan, device, trainer->model());
    if (on_device != nullptr) {
      trainer->set_gradient_engine(on_device.get());
    } else {
      // Back on the CPU, with every worker thread.
      trainer.reset();
      make_trainer(threads);
    }
  });
  // The GPU this rank's training was moved to is the one bound above.
  nccl_sums =
      sums_over_nccl(config, topology, plan, on_device != nullptr ? gpu_identity : std::string());
  if (nccl_sums)
    on_device->sum_over_replicas(
        std::make_unique<cuda::NcclReplicaSum>(topology.data(), nccl_watch(config)));
  gpu = std::move(on_device);
#else
  sums_over_nccl(config, topology, plan, std::string());
#endif
  // Under NCCL the host sync only sums the step's loss and accuracy: its gradients stay unbound.
  if (!nccl_sums) {
    if (sync) sync->attach(trainer->model().trainable_params());
    if (shared_sync) shared_sync->attach(trainer->model().trainable_params());
  }
  trainer->set_trace(trace);
  if (sync) sync->set_trace(trace);
  if (shared_sync) shared_sync->set_trace(trace);
}

}  // namespace strata
