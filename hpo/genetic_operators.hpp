// Genetic-algorithm operators as pure functions of their inputs and an Rng (after DEAP's
// selTournament, cxBlend, mutGaussian, selBest and migRing).
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "hpo/search_space.hpp"

namespace strata {

enum class Direction { maximize, minimize };

// True if fitness a is strictly better than b. NaN marks a failed individual and is worse than
// any number in either direction, so failures never win a comparison.
bool better(double a, double b, Direction direction);

// Indices of all individuals, best first; equal fitnesses keep their index order, so the result
// depends on the fitnesses alone.
std::vector<std::size_t> rank_order(std::span<const double> fitnesses, Direction direction);

// `count` winners of tournaments among k contestants drawn uniformly with replacement.
std::vector<std::size_t> select_tournament(std::span<const double> fitnesses, int k, int count,
                                           Direction direction, Rng& rng);

// BLX-alpha on real genes (in log space for log_uniform): both children lie on the line through
// the parents, within alpha times their distance beyond either parent, mirrored about their
// midpoint. Integer and choice genes are swapped between the children with probability 1/2.
// Children are clamped to the space.
std::pair<Genome, Genome> crossover_blend(const Genome& a, const Genome& b, double alpha,
                                          const SearchSpace& space, Rng& rng);

// The genes a mutation changes: each of `genes` with probability gene_rate, in index order.
std::vector<std::size_t> genes_to_mutate(std::size_t genes, double gene_rate, Rng& rng);

// Mutates the listed genes. Real genes get Gaussian noise of standard deviation sigma_fraction
// times the parameter's range (in log space for log_uniform), integers the same noise rounded and
// at least one step, choices another value drawn uniformly. The result is clamped to the space.
Genome mutate_genes(Genome genome, std::span<const std::size_t> genes, double sigma_fraction,
                    const SearchSpace& space, Rng& rng);

// DEAP's mutGaussian: mutate_genes on genes_to_mutate(gene_rate).
Genome mutate_gaussian(Genome genome, double sigma_fraction, double gene_rate,
                       const SearchSpace& space, Rng& rng);

// A child and its own mutation step, a factor on the mutation scale that is inherited and
// self-adapted (as an evolution strategy's step size), so that each lineage finds its own scale:
// large far from an optimum, small near one.
struct Offspring {
  Genome genome;
  double step = 1.0;
};

struct MutationSettings {
  double probability = 1.0;     // per child (DEAP's mutpb)
  double sigma_fraction = 0.1;  // of each parameter's range, before the child's step
  double gene_rate = 0.2;       // per gene (DEAP's indpb)
  double step_tau = 0.0;        // learning rate of the log step; 0: the step stays 1
};

// The self-adaptation learning rate for a genome of `genes` genes: adaptation / sqrt(genes).
double step_tau(double adaptation, std::size_t genes);

// step x exp(tau N(0, 1)), at most max_step (max_step <= 0: no cap).
double self_adapted_step(double step, double tau, double max_step, Rng& rng);

// The step of both children of a blend: the geometric mean of the parents' steps.
double blended_step(double a, double b);

// DEAP's mutpb with a self-adapted step: with probability m.probability (drawn only when below
// 1), the genes to mutate are drawn; if there are any, the child's step adapts (when
// m.step_tau > 0, capped at a scale of the whole range) and they mutate at m.sigma_fraction x
// step. Otherwise the child is returned unchanged, step included.
Offspring maybe_mutate(Offspring child, const MutationSettings& m, const SearchSpace& space,
                       Rng& rng);

// The mutation scale of bred generation `generation` (1 = the first bred one): sigma_fraction x
// decay^(generation - 1), so that steps shrink as a search converges.
double scheduled_sigma(double sigma_fraction, double decay, int generation);

// Indices of the best e individuals, best first.
std::vector<std::size_t> elites(std::span<const double> fitnesses, int e, Direction direction);

struct Individual {
  Genome genome;
  double fitness = std::numeric_limits<double>::quiet_NaN();  // NaN: failed or not yet known
  int trial_id = -1;  // the trial that evaluated this genome, kept when it is copied on
  double step = 1.0;  // its self-adapted mutation step (Offspring)
};

using Deme = std::vector<Individual>;

std::vector<double> fitnesses_of(const Deme& deme);

// Two children of two parents: with probability crossover_rate a blend (crossover_blend, both
// children taking blended_step of the parents' steps), otherwise copies of the parents. One draw,
// then the blend's.
std::pair<Offspring, Offspring> mate(const Individual& a, const Individual& b,
                                     double crossover_rate, double blend_alpha,
                                     const SearchSpace& space, Rng& rng);

// Steady-state replacement: `child` joins `population`; if that makes it larger than `capacity`,
// the worst individual leaves (among equally bad ones the earliest trial, so that a plateau keeps
// moving). A failed child (NaN fitness) never joins.
void replace_worst(Deme& population, Individual child, std::size_t capacity, Direction direction);

// Generations since the best so far last improved, for `patience`.
class Stall {
 public:
  // The best of a generation just closed.
  void record(double best, Direction direction);
  int generations() const { return stale_; }

 private:
  double best_so_far_ = std::numeric_limits<double>::quiet_NaN();
  int stale_ = 0;
};

// Ring migration: copies of the best `count` of deme i replace the worst `count` of deme
// (i + 1) % n, all emigrants chosen before any deme changes (DEAP migRing with selBest and
// selWorst). The best emigrant replaces the worst resident.
void migrate_ring(std::vector<Deme>& demes, int count, Direction direction);

}  // namespace strata
