// The config's sections other than the stages as C++ structs: the model's layers (or an objective
// in place of training), data, training, run, output, checkpoint and parallel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/source_mark.hpp"

namespace strata {

enum class LayerKind {
  dense,
  conv2d,
  maxpool2d,
  avgpool2d,
  flatten,
  dropout,
  relu,
  tanh,
  sigmoid,
  leaky_relu
};
// he: N(0, 2/fan_in); glorot: U(+-sqrt(6/(fan_in+fan_out))); zeros; uniform_fan_in:
// U(+-1/sqrt(fan_in)) for weights and biases, which is PyTorch's default for Linear and Conv2d.
// Other kinds start biases at 0.
enum class InitKind { he, glorot, zeros, uniform_fan_in };

// Model parallelism of one layer over the M shards of a replica (Megatron-LM): `column` splits a
// dense layer's outputs (or a conv's output channels), `row` splits a dense layer's inputs and
// must follow a column-split dense layer. Ignored when M = 1.
enum class SplitKind { none, column, row };

struct LayerSpec {
  LayerKind kind = LayerKind::relu;
  std::string name;                   // unique; defaults to "<kind>_<index>"
  int units = 0;                      // dense
  int filters = 0;                    // conv2d
  int kernel = 0;                     // conv2d
  int stride = 1;                     // conv2d; pools default to their size
  int padding = 0;                    // conv2d
  int size = 2;                       // pools: window edge
  float rate = 0.5f;                  // dropout
  float alpha = 0.01f;                // leaky_relu
  InitKind init = InitKind::he;       // dense, conv2d weights; biases start at zero
  SplitKind split = SplitKind::none;  // dense: column | row; conv2d: column (by output channel)
  SourceMark mark;
};

enum class DataSource { hdf5, synthetic };
// memory: every rank loads the training split; shards: each step reads only this rank's shard of
// the global batch from the HDF5 file.
enum class DataRead { memory, shards };

struct SyntheticSpec {
  int train = 2048;
  int test = 512;
  int classes = 10;
  int channels = 1;
  int height = 28;
  int width = 28;
};

// Where a split's images and labels are in an HDF5 file; "{split}" stands for train or test
// (a Keras-style file: x_{split} and y_{split}).
struct DatasetNames {
  std::string images = "/{split}/images";
  std::string labels = "/{split}/labels";
  std::string images_of(const std::string& split) const;
  std::string labels_of(const std::string& split) const;
};

struct DataConfig {
  DataSource source = DataSource::hdf5;
  DatasetNames names;  // data.images, data.labels
  std::string
      path;  // HDF5 file (source: hdf5); a relative path is read from the config's directory
  double validation_fraction = 0.1;  // held out of /train, in [0, 0.5]
  int train_subset = 0;              // use only the first N training samples; 0 = all
  int test_subset = 0;               // use only the first N test samples; 0 = all
  DataRead read = DataRead::memory;
  SyntheticSpec synthetic;
  // Only these classes, relabelled 0..k-1 in the listed order (a new label set); empty = all.
  std::vector<int> classes;
  int samples_per_class = 0;  // only this many training samples of each class; 0 = all
};

enum class OptimizerKind { sgd, adam };

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::sgd;
  double lr = 0.01;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9;  // adam
  double beta2 = 0.999;
  double eps = 1e-8;
};

enum class ScheduleKind { constant, step, cosine };

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::constant;
  double warmup_epochs = 0.0;  // linear warmup to lr over these epochs, before the schedule proper
  double step_epochs = 1.0;    // step: multiply by gamma every step_epochs
  double gamma = 0.1;
  double min_lr = 0.0;  // cosine: floor of the decay
};

// A layer whose parameters do not learn (transfer learning's frozen trunk).
struct FrozenLayer {
  std::string name;
  SourceMark mark;
};

// Layers whose parameters learn at a multiple of the schedule's rate (a fine-tuned trunk slower
// than a new head).
struct LrGroup {
  std::vector<std::string> layers;
  double lr_scale = 1.0;
  SourceMark mark;
};

struct TrainingConfig {
  int epochs = 1;
  int local_batch = 64;
  // When local_batch is searched, the largest value a trial can have: the run is planned for it,
  // so that every trial's global batch fits the bound.
  std::optional<int> largest_searched_local_batch;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  // Layers whose parameters keep their values: no optimizer state and no gradient allreduce, and
  // backward stops before them when no layer before them learns.
  std::vector<FrozenLayer> freeze;
  std::vector<LrGroup> lr_groups;
};

// Where a rank's forward and backward passes run (docs/gpu.md): a GPU when `auto` finds one and
// the layers can run there, or as `cpu` / `cuda` say.
enum class DeviceChoice { automatic, cpu, cuda };

// How a rank's worker threads share a training step: `batch` gives each thread its part of the
// batch on its own replica of the model; `units` gives each its part of every dense layer's units
// (and those rows of the weights), so that only activations pass between the cores, not weights
// and gradients. auto takes units for a model whose only parameters are dense layers' while the
// activations they move are the smaller traffic (Trainer::chooses_unit_split), else batch.
enum class ThreadSplit { automatic, batch, units };

struct RunSection {
  std::string name = "run";
  std::uint64_t seed = 1;
  int threads = 0;  // CPU threads for this rank; 0 = all cores the process may use
  DeviceChoice device = DeviceChoice::automatic;
  ThreadSplit thread_split = ThreadSplit::automatic;
  SourceMark thread_split_mark;  // for the error when the model cannot split its units
};

struct OutputConfig {
  std::string dir = "runs/out";
  double progress_seconds = 10.0;  // at most this long between progress lines
  SourceMark dir_mark;             // of output.dir, for errors about the directory
  bool trace = false;              // write trace.json: every rank's timeline (Chrome trace)
};

// When a run writes checkpoints (docs/architecture.md, "Checkpoints and restart"). Every epoch,
// generation and stage end writes one regardless, and so does a stop signal.
struct CheckpointConfig {
  int every_steps = 0;         // optimizer steps between periodic checkpoints; 0 = none
  double every_seconds = 0.0;  // seconds between periodic checkpoints; 0 = none
  int keep = 2;                // newest checkpoints kept per training; at least 2
  int signal = 10;             // SIGUSR1: the requeue signal (SIGTERM and SIGINT always count)
  std::string signal_name = "USR1";
};

enum class LrScaling { none, linear };

// What ranks beyond one training's bound buy: more member groups (independent trainings: search
// trials, ensemble members, or copies of a train stage), or, with `data`, one group whose replicas
// take every rank (a config error when that would exceed max_global_batch).
enum class RankLayout { members, data };

// How data-parallel replicas sum their gradients: MPI's allreduce in buckets that overlap
// backward, through a shared-memory window per node (parallel/hierarchical_sync.hpp), or NCCL on
// the replicas' GPUs (cuda/replica_sum.hpp). auto takes NCCL when every replica trains on a GPU,
// else the window when every node holds the same number of replicas, at least 2, else MPI.
enum class AllreduceKind { automatic, mpi, hierarchical, nccl };

// How ranks are laid out and how a member group trains together (docs/parallelism.md).
struct ParallelConfig {
  int max_global_batch = 0;  // bound on D x local_batch; 0 = local_batch (no data parallelism)
  int model = 0;             // model-parallel shards M; 0 = the planner chooses
  int data = 0;              // data-parallel replicas D; 0 = the planner chooses
  double memory_per_rank_mib = 0;  // limit for the planner's choice of M; 0 = no limit (M = 1)
  double bucket_mib = 25.0;        // gradient allreduce bucket; 0 = one allreduce per tensor
  LrScaling lr_scaling = LrScaling::linear;
  int accumulate = 1;  // micro-batches per optimizer step; 0 = auto: as many as keep K*D*b <= bound
  double watchdog_s = 300.0;  // report a rank waiting this long in one MPI operation; 0 = off
  RankLayout layout = RankLayout::members;
  AllreduceKind allreduce = AllreduceKind::automatic;
  SourceMark mark;  // of the parallel section, for planner errors
};

// An analytic function in place of training (model: {objective: rastrigin, dims: 10}): it tests
// and benchmarks the search and its scheduler with thousands of evaluations in seconds.
struct ObjectiveSpec {
  std::string name;  // rastrigin | sphere | rosenbrock | ackley
  int dims = 0;
  double eval_seconds = 0.0;         // artificial evaluation time, mean
  double eval_stddev_seconds = 0.0;  // and spread, to show what scheduling does for stragglers
};

}  // namespace strata
