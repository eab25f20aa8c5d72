// Selection, crossover, mutation, elitism and migration for the genetic search.
#include "hpo/genetic_operators.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>

#include <fmt/format.h>

namespace strata {

namespace {

void check_genome(const Genome& g, const SearchSpace& space, const char* what) {
  if (g.size() != space.params.size())
    throw std::invalid_argument(fmt::format("{}: a genome of {} genes for {} parameters", what,
                                            g.size(), space.params.size()));
}

double mutate_integer(const ParamSpec& p, double gene, double sigma_fraction, Rng& rng) {
  const double step = static_cast<double>(rng.normal()) * sigma_fraction * (p.hi - p.lo);
  double moved = std::round(gene + step);
  // Rounding would swallow small steps, and a narrow integer range would then never mutate.
  if (moved == gene && p.lo < p.hi) {
    moved = gene + (step < 0.0 ? -1.0 : 1.0);
    if (moved < p.lo || moved > p.hi) moved = 2.0 * gene - moved;
  }
  return clamp_value(p, moved);
}

double mutate_choice(const ParamSpec& p, double gene, Rng& rng) {
  const auto n = p.choices.size();
  if (n < 2) return gene;
  // Drawing among the other values makes gene_rate the rate at which a choice actually changes.
  auto other = rng.below(n - 1);
  if (static_cast<double>(other) >= gene) ++other;
  return static_cast<double>(other);
}

}  // namespace

bool better(double a, double b, Direction direction) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return direction == Direction::maximize ? a > b : a < b;
}

std::vector<std::size_t> rank_order(std::span<const double> fitnesses, Direction direction) {
  std::vector<std::size_t> order(fitnesses.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return better(fitnesses[a], fitnesses[b], direction);
  });
  return order;
}

std::vector<std::size_t> select_tournament(std::span<const double> fitnesses, int k, int count,
                                           Direction direction, Rng& rng) {
  if (fitnesses.empty()) throw std::invalid_argument("select_tournament: no individuals");
  if (k < 1)
    throw std::invalid_argument(
        fmt::format("select_tournament: tournament size {} (must be at least 1)", k));
  if (count < 0)
    throw std::invalid_argument(fmt::format("select_tournament: count {} is negative", count));
  std::vector<std::size_t> chosen;
  chosen.reserve(static_cast<std::size_t>(count));
  for (int c = 0; c < count; ++c) {
    std::size_t winner = rng.below(fitnesses.size());
    for (int i = 1; i < k; ++i) {
      const std::size_t rival = rng.below(fitnesses.size());
      if (better(fitnesses[rival], fitnesses[winner], direction)) winner = rival;
    }
    chosen.push_back(winner);
  }
  return chosen;
}

std::pair<Genome, Genome> crossover_blend(const Genome& a, const Genome& b, double alpha,
                                          const SearchSpace& space, Rng& rng) {
  check_genome(a, space, "crossover_blend");
  check_genome(b, space, "crossover_blend");
  if (!(alpha >= 0.0))
    throw std::invalid_argument(fmt::format("crossover_blend: alpha {} (must be >= 0)", alpha));
  Genome c1 = a, c2 = b;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const auto& p = space.params[i];
    if (p.kind == ParamKind::uniform || p.kind == ParamKind::log_uniform) {
      const double x1 = to_search_scale(p, a[i]), x2 = to_search_scale(p, b[i]);
      const double gamma = (1.0 + 2.0 * alpha) * rng.uniform_double() - alpha;
      c1[i] = clamp_value(p, from_search_scale(p, (1.0 - gamma) * x1 + gamma * x2));
      c2[i] = clamp_value(p, from_search_scale(p, gamma * x1 + (1.0 - gamma) * x2));
    } else {
      if (rng.uniform_double() < 0.5) std::swap(c1[i], c2[i]);
      c1[i] = clamp_value(p, c1[i]);
      c2[i] = clamp_value(p, c2[i]);
    }
  }
  return {std::move(c1), std::move(c2)};
}

std::vector<std::size_t> genes_to_mutate(std::size_t genes, double gene_rate, Rng& rng) {
  if (!(gene_rate >= 0.0 && gene_rate <= 1.0))
    throw std::invalid_argument(fmt::format("gene rate {} (must be in [0, 1])", gene_rate));
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < genes; ++i)
    if (rng.uniform_double() < gene_rate) chosen.push_back(i);
  return chosen;
}

Genome mutate_genes(Genome genome, std::span<const std::size_t> genes, double sigma_fraction,
                    const SearchSpace& space, Rng& rng) {
  check_genome(genome, space, "mutate_genes");
  if (!(sigma_fraction >= 0.0))
    throw std::invalid_argument(
        fmt::format("mutate_genes: sigma {} (must be >= 0)", sigma_fraction));
  for (const std::size_t i : genes) {
    const auto& p = space.params.at(i);
    switch (p.kind) {
      case ParamKind::uniform:
      case ParamKind::log_uniform: {
        const double range = to_search_scale(p, p.hi) - to_search_scale(p, p.lo);
        const double x = to_search_scale(p, genome[i]) +
                         static_cast<double>(rng.normal()) * sigma_fraction * range;
        genome[i] = clamp_value(p, from_search_scale(p, x));
        break;
      }
      case ParamKind::integer:
        genome[i] = mutate_integer(p, genome[i], sigma_fraction, rng);
        break;
      case ParamKind::choice:
        genome[i] = mutate_choice(p, genome[i], rng);
        break;
    }
  }
  return genome;
}

Genome mutate_gaussian(Genome genome, double sigma_fraction, double gene_rate,
                       const SearchSpace& space, Rng& rng) {
  check_genome(genome, space, "mutate_gaussian");
  const auto genes = genes_to_mutate(genome.size(), gene_rate, rng);
  return mutate_genes(std::move(genome), genes, sigma_fraction, space, rng);
}

double step_tau(double adaptation, std::size_t genes) {
  return genes == 0 ? 0.0 : adaptation / std::sqrt(static_cast<double>(genes));
}

double self_adapted_step(double step, double tau, double max_step, Rng& rng) {
  const double adapted = step * std::exp(tau * static_cast<double>(rng.normal()));
  return max_step > 0.0 ? std::min(adapted, max_step) : adapted;
}

double blended_step(double a, double b) {
  return std::sqrt(a * b);
}

Offspring maybe_mutate(Offspring child, const MutationSettings& m, const SearchSpace& space,
                       Rng& rng) {
  check_genome(child.genome, space, "maybe_mutate");
  if (m.probability < 1.0 && !(rng.uniform_double() < m.probability)) return child;
  const auto genes = genes_to_mutate(child.genome.size(), m.gene_rate, rng);
  // A step that scaled no gene would drift on a copy of its parent, which selection cannot judge.
  if (genes.empty()) return child;
  if (m.step_tau > 0.0) {
    // Beyond a scale of the whole range a larger step only lands on the bounds.
    const double max_step = m.sigma_fraction > 0.0 ? 1.0 / m.sigma_fraction : 0.0;
    child.step = self_adapted_step(child.step, m.step_tau, max_step, rng);
  }
  child.genome =
      mutate_genes(std::move(child.genome), genes, m.sigma_fraction * child.step, space, rng);
  return child;
}

std::pair<Offspring, Offspring> mate(const Individual& a, const Individual& b,
                                     double crossover_rate, double blend_alpha,
                                     const SearchSpace& space, Rng& rng) {
  Offspring c1{a.genome, a.step}, c2{b.genome, b.step};
  if (rng.uniform_double() < crossover_rate) {
    std::tie(c1.genome, c2.genome) = crossover_blend(c1.genome, c2.genome, blend_alpha, space, rng);
    c1.step = c2.step = blended_step(a.step, b.step);
  }
  return {std::move(c1), std::move(c2)};
}

double scheduled_sigma(double sigma_fraction, double decay, int generation) {
  return sigma_fraction * std::pow(decay, std::max(generation - 1, 0));
}

std::vector<std::size_t> elites(std::span<const double> fitnesses, int e, Direction direction) {
  if (e < 0 || static_cast<std::size_t>(e) > fitnesses.size())
    throw std::invalid_argument(
        fmt::format("elites: {} elites of {} individuals", e, fitnesses.size()));
  auto order = rank_order(fitnesses, direction);
  order.resize(static_cast<std::size_t>(e));
  return order;
}

std::vector<double> fitnesses_of(const Deme& deme) {
  std::vector<double> f;
  f.reserve(deme.size());
  for (const auto& ind : deme) f.push_back(ind.fitness);
  return f;
}

void replace_worst(Deme& population, Individual child, std::size_t capacity, Direction direction) {
  if (std::isnan(child.fitness)) return;
  population.push_back(std::move(child));
  if (population.size() <= capacity) return;
  std::size_t worst = 0;
  for (std::size_t i = 1; i < population.size(); ++i) {
    const Individual& a = population[i];
    const Individual& w = population[worst];
    if (better(w.fitness, a.fitness, direction) ||
        (!better(a.fitness, w.fitness, direction) && a.trial_id < w.trial_id))
      worst = i;
  }
  population.erase(population.begin() + static_cast<std::ptrdiff_t>(worst));
}

void Stall::record(double best, Direction direction) {
  if (better(best, best_so_far_, direction)) {
    best_so_far_ = best;
    stale_ = 0;
  } else {
    ++stale_;
  }
}

void migrate_ring(std::vector<Deme>& demes, int count, Direction direction) {
  if (count < 0) throw std::invalid_argument(fmt::format("migrate_ring: {} migrants", count));
  if (demes.size() < 2 || count == 0) return;
  for (std::size_t d = 0; d < demes.size(); ++d) {
    if (static_cast<std::size_t>(count) > demes[d].size())
      throw std::invalid_argument(fmt::format(
          "migrate_ring: {} migrants from deme {} of {} individuals", count, d, demes[d].size()));
  }
  // Copies first: deme i+1 must receive deme i's own best, not what deme i just received.
  std::vector<std::vector<Individual>> emigrants(demes.size());
  for (std::size_t d = 0; d < demes.size(); ++d) {
    for (auto idx : elites(fitnesses_of(demes[d]), count, direction))
      emigrants[d].push_back(demes[d][idx]);
  }
  for (std::size_t d = 0; d < demes.size(); ++d) {
    auto& target = demes[(d + 1) % demes.size()];
    auto order = rank_order(fitnesses_of(target), direction);
    for (int j = 0; j < count; ++j) target[order[order.size() - 1 - j]] = emigrants[d][j];
  }
}

}  // namespace strata
