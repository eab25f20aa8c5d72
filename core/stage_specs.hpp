// The stages section's structs: each stage's kind, its settings (train, hpo, ensemble, transfer)
// and its own parallel block.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/search_params.hpp"
#include "core/section_specs.hpp"
#include "core/source_mark.hpp"

namespace strata {

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

}  // namespace strata
