#include "jobs/training_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <ctime>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/clock.hpp"
#include "core/config_names.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "core/weights_io.hpp"
#include "jobs/fault_injection.hpp"
#include "parallel/failure_agreement.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "parallel/state_gather.hpp"

#ifdef STRATA_HAVE_CUDA
#include "cuda/cuda_check.hpp"
#include "cuda/device_model.hpp"
#include "cuda/model_shards.hpp"
#include "cuda/replica_sum.hpp"
#endif

namespace strata {

namespace {

enum VoteFlag : unsigned { stop_flag = 1u, clock_flag = 2u, limit_flag = 4u };

std::string position_text(const TrainPosition& p, int epochs, std::int64_t steps_per_epoch) {
  if (p.epoch > epochs) return fmt::format("the end of epoch {} (training complete)", epochs);
  return fmt::format("epoch {}/{} step {}/{} (global step {})", p.epoch, epochs, p.epoch_step,
                     steps_per_epoch, p.global_step);
}

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
    if (FaultPlan::from_environment().fail_in_build == topology.world_rank())
      throw std::runtime_error(
          fmt::format("injected fault (STRATA_FAULT=fail_in_build={}) while building a training",
                      topology.world_rank()));
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

TrainingSession::TrainingSession(Trainer& trainer, const Topology& topology,
                                 const StopSignals* signals, SessionSettings settings,
                                 StepWork work)
    : trainer_(trainer),
      topology_(topology),
      signals_(signals),
      settings_(std::move(settings)),
      work_(std::move(work)),
      store_(settings_.checkpoint_dir, settings_.checkpoint.keep),
      vote_(topology.member()) {
  trainer_.set_step_hook([this] { at_step(); });
  store_.set_trace(settings_.trace);
}

std::optional<std::filesystem::path> TrainingSession::resume() {
  // The group's first rank chooses the checkpoint, so that every rank loads the same file.
  std::string chosen, problem;
  std::optional<StateDict> verified;  // the leader's: load_newest has read and checked it already
  if (leader()) {
    try {
      auto loaded = store_.load_newest([&](const std::string& why) {
        fmt::print(stderr, "strata: {}skipping a damaged checkpoint: {}\n", settings_.label, why);
      });
      if (loaded) {
        chosen = loaded->path.string();
        verified = std::move(loaded->state);
      }
    } catch (const DataError& e) {
      problem = e.what();
    }
  }
  const Communicator& member = topology_.member();
  member.broadcast_string(problem, 0);
  if (!problem.empty()) throw DataError(problem);
  member.broadcast_string(chosen, 0);
  if (chosen.empty()) return std::nullopt;
  const StateDict state = verified ? std::move(*verified) : read_checkpoint(chosen);
  elapsed_before_ =
      state.has_scalar("meta/elapsed_seconds") ? state.get_real("meta/elapsed_seconds") : 0.0;
  started_ = Clock::now();
  try {
    trainer_.load_state(state);
  } catch (const DataError& e) {
    throw DataError(
        fmt::format("{}: {} (a checkpoint of another config? move {} aside or pass "
                    "--fresh)",
                    chosen, e.what(), settings_.checkpoint_dir.string()));
  }
  if (leader()) {
    const std::string line = fmt::format(
        "[resume] {}from {}: {}, written on G {} x D {} x M {} with {} thread(s)", settings_.label,
        chosen, position_text(trainer_.position(), settings_.epochs, trainer_.steps_per_epoch()),
        state.get_int("meta/groups"), state.get_int("meta/data"), state.get_int("meta/model"),
        state.get_int("meta/threads"));
    if (settings_.say) {
      settings_.say(line);
    } else {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    }
  }
  return std::filesystem::path(chosen);
}

void TrainingSession::run(int epochs, const ProgressCallback& on_progress,
                          const std::function<void(const EpochMetrics&)>& on_epoch) {
  while (trainer_.position().epoch <= epochs) {
    const EpochMetrics m = trainer_.run_epoch(on_progress);
    if (on_epoch) on_epoch(m);
    if (m.epoch < epochs || settings_.checkpoint_last_epoch) checkpoint();
  }
}

void TrainingSession::checkpoint() {
  const TraceSpan span(settings_.trace, "checkpoint snapshot", "io");
  last_checkpoint_ = Clock::now();
  // Data replicas hold the same state: replica 0's shards save it.
  if (topology_.coords().data != 0) return;
  const Plan& plan = topology_.plan();
  // The snapshot goes into the buffers of the last checkpoint (written by now: save() would wait
  // for it anyway), so that it copies at memory speed instead of faulting in new pages.
  if (leader()) store_.wait();
  StateDict state = leader() ? store_.take_buffers() : std::move(gathered_);
  StateDict& local = plan.model > 1 ? shard_state_ : state;
  // A GPU's state travels to the host while training goes on, unless the shards' state must be
  // gathered now.
  std::function<void(StateDict&)> complete;
  if (plan.model == 1 && leader())
    complete = trainer_.save_state_in_flight(local);
  else
    trainer_.save_state(local);
  local.merge(settings_.meta, "meta");
  const TrainPosition& p = trainer_.position();
  local.put_int("meta/epoch", p.epoch);
  local.put_int("meta/epoch_step", p.epoch_step);
  local.put_int("meta/global_step", p.global_step);
  local.put_int("meta/epochs", settings_.epochs);
  local.put_int("meta/world_size", plan.world_size);
  local.put_int("meta/groups", plan.groups);
  local.put_int("meta/data", plan.data);
  local.put_int("meta/model", plan.model);
  local.put_int("meta/accumulate", trainer_.accumulate());
  local.put_int("meta/global_batch", trainer_.global_batch());
  local.put_int("meta/threads", trainer_.threads());
  local.put_int("meta/written_unix", static_cast<std::int64_t>(std::time(nullptr)));
  local.put_real("meta/elapsed_seconds", elapsed_seconds());
  if (plan.model > 1) gather_whole_state(local, topology_.model(), state, gather_scratch_);
  if (leader())
    store_.save(std::move(state), std::move(complete));
  else
    gathered_ = std::move(state);
}

void TrainingSession::save_final_weights(const std::filesystem::path& path) {
  const Normalisation normalisation = trainer_.data().normalisation();
  if (topology_.plan().model > 1) {
    const auto whole = gather_full_weights(trainer_.model());
    if (leader()) save_weights(path.string(), whole, &normalisation);
  } else if (leader()) {
    save_weights(path.string(), trainer_.model(), &normalisation);
  }
}

double TrainingSession::elapsed_seconds() const {
  return elapsed_before_ + seconds_since(started_);
}

void TrainingSession::wait() {
  if (leader()) store_.wait();
}

void TrainingSession::at_step() {
  const FaultPlan& fault = FaultPlan::from_environment();
  const std::int64_t step = trainer_.position().global_step;
  if (step == fault.kill_at_step) std::raise(SIGKILL);
  if (step == fault.fail_at_step && topology_.world_rank() == topology_.world().size() - 1)
    throw DataError(fmt::format("injected fault (STRATA_FAULT=fail_at_step={}) on world rank {}",
                                step, topology_.world_rank()));
  if (step == fault.stop_at_step) {
    // To the process: this thread blocks it. Wait until the signal thread has recorded it, so
    // that this step boundary sees it.
    ::kill(::getpid(), settings_.checkpoint.signal);
    while (signals_ != nullptr && !signals_->requested()) std::this_thread::yield();
  }
  if (work_.serve) work_.serve();
  unsigned mine = 0;
  if (signals_ != nullptr && signals_->requested()) mine |= stop_flag;
  if (work_.stop_elsewhere && work_.stop_elsewhere()) mine |= stop_flag;
  if (leader() && settings_.checkpoint.every_seconds > 0 &&
      seconds_since(last_checkpoint_) >= settings_.checkpoint.every_seconds)
    mine |= clock_flag;
  if (work_.over_limit && work_.over_limit()) mine |= limit_flag;
  const unsigned voted = vote_.exchange(mine);
  const TrainPosition& p = trainer_.position();
  if (voted & stop_flag) {
    const auto start = Clock::now();
    checkpoint();
    wait();
    throw Interrupted(
        fmt::format("{}stopped by a signal at epoch {} step {}: checkpoint written in {:.2f} s",
                    settings_.label, p.epoch, p.epoch_step, seconds_since(start)));
  }
  if (voted & limit_flag) work_.stop_over_limit();
  const int every = settings_.checkpoint.every_steps;
  if ((every > 0 && p.global_step % every == 0) || (voted & clock_flag)) checkpoint();
}

}  // namespace strata
