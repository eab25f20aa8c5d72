// Bayesian optimisation with a Gaussian process (the model BoTorch and Optuna's GPSampler use),
// over the same typed space as the other searches, keeping one training in flight per member
// group.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hpo/model_search.hpp"

namespace strata {

struct GpConfig : ModelSearchConfig {
  // Fewer startup trials than TPE's 10: with the short length scales below, the process's
  // proposals find the best region of Fashion-MNIST's seven parameters sooner than more random
  // ones.
  GpConfig() { startup = 7; }
  bool latin_startup = true;  // the startup trials as one Latin hypercube
  int candidates = 1000;      // random points the acquisition is first evaluated at
  int fit_iterations = 200;
  // Results the process is fitted to: past it, the best half and the latest half of them (the fit
  // grows with the cube of their number).
  int max_observations = 200;
};

// Throws std::invalid_argument naming the setting and its value.
void validate(const GpConfig& config);

// A genome as a point of the unit cube the process models: a real in its search scale (log for
// log_uniform) and an integer mapped linearly onto [0, 1]; a choice of numbers in increasing or
// decreasing order as its index on [0, 1] (so that batch sizes stay ordered), any other choice as
// one 0/1 coordinate per value. A parameter with one value sits at 0.5.
class UnitEncoding {
 public:
  explicit UnitEncoding(const SearchSpace& space);
  std::size_t dims() const { return dims_; }
  std::vector<double> encode(const Genome& genome) const;
  // The legal genome nearest to a point (reals clamped, integers rounded, choices snapped).
  Genome decode(std::span<const double> point) const;

 private:
  std::vector<ParamSpec> specs_;
  std::vector<bool> one_hot_;  // per parameter
  std::size_t dims_ = 0;
};

// The rank-based Gaussian copula of a set of values (HEBO's and others' remedy for outputs far
// from Gaussian): each becomes the standard normal quantile of (rank + 1/2) / n, ties sharing
// their mean rank. A diverged training next to good ones no longer dominates the fit.
std::vector<double> normal_scores(std::span<const double> values);

// The standard normal quantile function.
double normal_quantile(double p);

// The reported trainings (cached trials left out) a GpSearch fits its process to, in id order:
// all of them, or past `most` the best most / 2 (successes before failures) and, of the rest,
// those proposed last (the highest ids).
std::vector<const Trial*> gp_observations(std::span<const Trial> trials, Direction direction,
                                          int most);

// The point with one coordinate moved to a face of the unit cube, for each coordinate in turn and
// the faces 0 then 1: 2 x dims points. Hyperparameters are often best at a bound of their range (no
// dropout, the smallest batch), which neither random points nor small steps from a good result
// well inside the range reach.
std::vector<std::vector<double>> face_projections(const std::vector<double>& point);

// The centre of the length scales' prior for a fit to `results` results of `inputs` coordinates:
// a length of 1 (log 0) for fewer than short_lengthscale_results, then BoTorch's, which grows with
// the inputs. From a few results the long lengths of the latter extrapolate a trend to the cube's
// corners, where on Fashion-MNIST a quarter of the first proposals collapsed.
inline constexpr std::size_t short_lengthscale_results = 15;
double lengthscale_centre(std::size_t results, std::size_t inputs);

// Gaussian-process Bayesian optimisation in the steady state (ModelSearch): the outputs are the
// results' normal scores (failed trainings tie with the worst), the process is refitted for each
// proposal, and the proposal maximises log expected improvement over the best posterior mean at
// an evaluated point. Trials in flight enter as observations of their posterior mean (the
// "kriging believer"), so the groups given proposals at the same time get different ones. The
// acquisition is maximised over `candidates` random points, perturbations of the best results and
// their face projections, then refined locally; points equal to an evaluated genome are skipped.
// Past max_observations results the process sees the best and the last proposed of them.
class GpSearch : public ModelSearch {
 public:
  GpSearch(SearchSpace space, GpConfig config);

  const GpConfig& config() const { return config_; }

 private:
  Genome model_proposal(Rng& rng) const override;

  GpConfig config_;
  UnitEncoding encoding_;
};

}  // namespace strata
