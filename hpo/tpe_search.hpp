// The tree-structured Parzen estimator as a search (Optuna's default sampler), over the same typed
// space as the genetic search, keeping one training in flight per member group.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpo/joint_parzen.hpp"
#include "hpo/model_search.hpp"
#include "hpo/parzen.hpp"
#include "hpo/search.hpp"

namespace strata {

struct TpeConfig : ModelSearchConfig {
  int candidates = 24;        // draws from the good density per parameter
  double gamma = 0.1;         // the good fraction of the observations
  int max_good = 25;          // at most this many good observations
  double prior_weight = 1.0;  // of the wide prior component
  // One density over whole genomes (JointParzen) instead of one per parameter.
  bool multivariate = false;
};

// Throws std::invalid_argument naming the setting and its value.
void validate(const TpeConfig& config);

// One parameter's good density l (of the genes of `good`) and bad density g (of `bad`), in the
// parameter's search scale: log for log_uniform, [lo - 0.5, hi + 0.5] for an integer, the index
// for a choice.
class ParamDensities {
 public:
  ParamDensities(const ParamSpec& spec, std::span<const double> good, std::span<const double> bad,
                 double prior_weight);
  // log l(gene) - log g(gene): how much more likely the gene is among the good.
  double log_ratio(double gene) const;
  // A legal gene drawn from l.
  double sample_good(Rng& rng) const;

 private:
  ParamSpec spec_;
  std::optional<Parzen> good_, bad_;              // reals and integers
  std::vector<double> good_choice_, bad_choice_;  // choices
};

// One parameter's TPE choice: among `candidates` draws from l, the one with the largest
// log l(x) - log g(x).
double tpe_choose(const ParamSpec& spec, std::span<const double> good, std::span<const double> bad,
                  const TpeConfig& config, Rng& rng);

// The TPE model of a set of results, over whole genomes: each parameter's densities from the
// best good_count(n) successful trials and the rest (failures and trials in flight included).
class TpeModel {
 public:
  // Empty (scores nothing) while there is no successful trial. With config.multivariate the
  // densities are over whole genomes (JointParzen), else one per parameter.
  TpeModel(const SearchSpace& space, std::span<const Trial> trials, Direction direction,
           const TpeConfig& config);
  bool empty() const { return params_.empty() && !good_joint_; }
  // log l - log g (univariate: its sum over the parameters): larger where good results lie and bad
  // ones do not.
  double score(const Genome& genome) const;
  // TPE's proposal: each parameter chosen by `candidates` draws from its l (tpe_choose's rule);
  // multivariate, the best of `candidates` whole genomes drawn from l.
  Genome propose(int candidates, Rng& rng) const;

 private:
  std::vector<ParamDensities> params_;
  std::vector<ParamSpec> specs_;                       // multivariate
  std::optional<JointParzen> good_joint_, bad_joint_;  // multivariate
};

// TPE in the steady state (ModelSearch): each proposal comes from the densities of the good (the
// best gamma fraction, at most max_good) and the bad results so far. Trials still in flight count
// as bad (Optuna's constant liar), so that the groups given proposals at the same time do not all
// get the same one; failed trials are bad too.
class TpeSearch : public ModelSearch {
 public:
  TpeSearch(SearchSpace space, TpeConfig config);

  const TpeConfig& config() const { return config_; }

 private:
  Genome model_proposal(Rng& rng) const override;

  TpeConfig config_;
};

}  // namespace strata
