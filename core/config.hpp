// The run configuration: the YAML schema as C++ structs, and its checked loader.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/search_params.hpp"
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

enum class StageKind { train, hpo, ensemble, transfer };

enum class SearchAlgorithm { genetic, random, grid, tpe, gp, pbt };

// The searches whose budget is `trials` (proposals in all), not a population or max_trainings.
inline bool runs_trials(SearchAlgorithm a) {
  return a == SearchAlgorithm::random || a == SearchAlgorithm::tpe || a == SearchAlgorithm::gp;
}

// The genetic search's schedule: generations with a barrier, or the barrier-free steady state.
enum class SearchSchedule { generational, asynchronous };

// The hpo stage (docs/search.md): a search over `space`, each individual trained as the rest of the
// config says with its parameters substituted.
struct HpoSpec {
  // Gaussian-process Bayesian optimisation reached the Fashion-MNIST targets in the most seeds with
  // the fewest trainings (docs/benchmarks.md), so it is what a search without `algorithm` runs.
  SearchAlgorithm algorithm = SearchAlgorithm::gp;
  std::vector<ParamSpec> space;
  int population = 8;
  int generations = 5;
  int tournament = 3;
  int elites = 1;
  int demes = 1;
  int migration_interval = 5;
  int migrants = 1;
  double blend_alpha = 0.45;
  double crossover_rate = 0.7;
  double mutation_sigma =
      0.1;  // as a fraction of each parameter's range (log range for log_uniform)
  double mutation_rate = 0.2;  // per gene
  // Per child (DEAP's mutpb): the chance that it is mutated at all; 1 = every child.
  double mutation_probability = 0.3;
  // mutation_sigma is multiplied by this every generation after the first bred one, so that the
  // steps shrink as the search converges; 1 = constant.
  double mutation_decay = 1.0;
  // Each child's own mutation step self-adapts, log-normally with tau = this / sqrt(genes);
  // 0 = off (every child mutates at mutation_sigma).
  double step_adaptation = 1.0;
  int patience = 0;  // generations without improvement before stopping; 0 = never
  SearchSchedule schedule = SearchSchedule::generational;
  // Each child is the best a TPE model of the results so far scores among this many bred; 0: off.
  int surrogate_candidates = 0;
  PruneSettings prune;  // rule none: every training runs all its epochs
  int max_epochs = 0;   // epochs trained by all trials together; 0 = no limit
  bool has_target = false;
  double target = 0.0;        // stop on reaching this fitness
  int max_trainings = 0;      // 0 = no limit
  int trials = 16;            // random, tpe and gp search
  int startup_trials = 0;     // tpe and gp: random trials before the model; 0: tpe 10, gp 7
  bool multivariate = false;  // tpe: one density over whole genomes, not one per parameter
  int grid_points = 3;        // grid search: points per real parameter
  // Population-based training: every `interval` epochs the worst `quantile` of the members copy a
  // best-quantile member's training state and perturb its values (each real by 0.8 or 1.2, each
  // choice or integer a step), or draw a value afresh with `resample_probability`.
  int interval = 1;
  double quantile = 0.25;
  double resample_probability = 0.25;
  bool maximize = true;  // fitness direction; the default follows the fitness
  bool direction_given =
      false;  // a function objective is minimised unless `direction` says otherwise
  std::string fitness = "val_accuracy";  // val_accuracy | val_loss
  double trial_timeout_s = 0.0;          // 0 = no limit
  int keep_top = 1;  // the weights of this many best trials are kept (trials/<id>/weights.h5)
};

// A named result of an earlier stage ("hpo.best", "hpo2.top_k"), where the config refers to it.
struct ArtifactRef {
  std::string name;
  SourceMark mark;
};

// The part of every image an ensemble member sees: rows [row_begin, row_end) and columns
// [col_begin, col_end) of the listed channels; the rest is zero after normalisation (the training
// mean). Zero ends mean "to the edge"; no channels means all of them.
struct FeatureSubset {
  int row_begin = 0, row_end = 0;
  int col_begin = 0, col_end = 0;
  std::vector<int> channels;
  SourceMark mark;
};

enum class CombinerKind { mean, weighted, vote };

// The ensemble stage: members are configs (the run's own, or from an earlier search's artifact)
// times one kind of variation (seeds, bootstrap samples or feature subsets); their predictions are
// combined over the peers communicator.
struct EnsembleSpec {
  std::optional<ArtifactRef> from;  // hpo.top_k or hpo.best; none: the run's config
  int members = 0;                  // from a .top_k: its first n configs; 0 = all
  int seeds = 0;                    // initialisations per config; 0 = 1 unless another variation
  int bagging = 0;                  // bootstrap samples of the training set per config
  std::vector<FeatureSubset> feature_subsets;  // one member per subset, per config
  std::vector<CombinerKind> combiners{CombinerKind::mean, CombinerKind::weighted,
                                      CombinerKind::vote};
  int epochs = 0;  // 0 = each member config's own training.epochs
};

// One super-class of a hierarchical transfer: a name and the classes under it.
struct SuperClassSpec {
  std::string name;
  std::vector<int> classes;
  SourceMark mark;
};

// The transfer stage: fine-tunes pretrained weights, on a new label set when `classes` is given
// (few-sample with samples_per_class), beside the same training from scratch when asked. With
// `hierarchy`: a coarse classifier over the super-classes (from the pretrained weights when there
// are some), a sub-classifier per super-class started from the coarse trunk, and a flat model of
// the same parameter count to compare with.
struct TransferSpec {
  // An earlier stage's artifact (hpo.best, train.model, transfer.model) or, when `pretrained_path`
  // is set instead, a weights file or checkpoint.
  std::optional<ArtifactRef> pretrained_artifact;
  std::string pretrained_path;
  SourceMark pretrained_mark;
  std::vector<int> classes;   // the new label set, relabelled 0..k-1; empty = the data's
  int samples_per_class = 0;  // training samples per class; 0 = all
  std::vector<FrozenLayer> freeze;
  // Layers that start fresh instead of from the pretrained weights; empty: the last layer with
  // parameters when `classes` changes the label set (it is resized to the new classes).
  std::vector<FrozenLayer> head;
  std::vector<LrGroup> lr_groups;
  int epochs = 0;                // 0 = the pretrained config's
  int local_batch = 0;           // 0 = the pretrained config's (few samples want small batches)
  double lr = 0.0;               // 0 = the pretrained config's optimizer.lr
  bool compare_scratch = false;  // also train the same model from its initialisation
  std::vector<SuperClassSpec> hierarchy;
};

// A train stage takes no settings of its own.
struct TrainSpec {};

// One entry of `stages:`. The settings' alternative is the stage's kind, in StageKind's order.
struct StageSpec {
  std::variant<TrainSpec, HpoSpec, EnsembleSpec, TransferSpec> settings;
  // The stage's own `parallel:` block over the run's (unset keys inherit the run's); none: the
  // run's.
  std::optional<ParallelConfig> parallel;
  SourceMark mark;
  StageKind kind() const { return static_cast<StageKind>(settings.index()); }
};

// An analytic function in place of training (model: {objective: rastrigin, dims: 10}): it tests
// and benchmarks the search and its scheduler with thousands of evaluations in seconds.
struct ObjectiveSpec {
  std::string name;  // rastrigin | sphere | rosenbrock | ackley
  int dims = 0;
  double eval_seconds = 0.0;         // artificial evaluation time, mean
  double eval_stddev_seconds = 0.0;  // and spread, to show what scheduling does for stragglers
};

struct Config {
  std::string file;  // the YAML file it was loaded from
  std::string text;  // its YAML source, from which each search trial's config is made
  // `--set key.path=value` overrides, applied after ${VAR} expansion to every tree made from text
  std::vector<std::string> overrides;
  // The tree the run reads, as YAML: environment variables expanded and overrides applied.
  std::string resolved_text;
  RunSection run;
  DataConfig data;
  std::vector<LayerSpec> layers;  // empty when `objective` is set
  std::optional<ObjectiveSpec> objective;
  TrainingConfig training;
  ParallelConfig parallel;
  OutputConfig output;
  CheckpointConfig checkpoint;
  std::vector<StageSpec> stages;  // defaults to one train stage
};

// Loads and checks a config: ${VAR} and ${VAR:-default} in its values are expanded from the
// environment, then `overrides` ("training.epochs=3", "model.layers[1].dense.units=64") applied.
// Throws ConfigError whose message names the file, line, column (or the override), the key path
// (e.g. "training.optimizer.lr") and what was expected.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same, from YAML text; `file` is only used in messages.
Config parse_config(const std::string& yaml_text, const std::string& file,
                    const std::vector<std::string>& overrides = {});

// The message of the ConfigError for run.thread_split: units on a model with `layer`, a layer
// with parameters other than a dense one (empty: a model without dense layers).
std::string thread_split_units_error(const Config& config, const std::string& layer);

// A search trial's config: `base` with every "$name" replaced by values.at(name), a YAML scalar
// ("0.01", "32", "adam"). Throws ConfigError as parse_config does.
Config instantiate(const Config& base, const std::map<std::string, std::string>& values);

// The YAML text of a plain training config: `base` with every "$name" replaced by values.at(name),
// no stages section (so one train stage), and output.dir set to `output_dir`. What a search
// writes as best.yaml: runnable as it is with `strata run`.
std::string trial_config_text(const Config& base, const std::map<std::string, std::string>& values,
                              const std::string& output_dir);

// A plain config file that trains `config` as a stage built it: trial_config_text of its source
// with the values a stage sets in the struct written in (run.seed; training.epochs, local_batch
// and optimizer.lr; data.classes and samples_per_class; the last dense layer's units).
std::string trained_config_text(const Config& config);

// The search space of the config's hpo stage, empty when it has none.
const std::vector<ParamSpec>& search_space(const Config& config);

const char* to_string(LayerKind kind);

// The config a stage runs: `config` with the stage's parallel block in place of the run's.
Config stage_config(const Config& config, const StageSpec& stage);

}  // namespace strata
