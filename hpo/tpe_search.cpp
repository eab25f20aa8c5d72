#include "hpo/tpe_search.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "hpo/bad_setting.hpp"

namespace strata {

void validate(const TpeConfig& c) {
  validate(static_cast<const ModelSearchConfig&>(c), "tpe search");
  if (c.candidates < 1) bad_setting("tpe search", "candidates", c.candidates, "must be >= 1");
  if (!(c.gamma > 0.0 && c.gamma <= 1.0))
    bad_setting("tpe search", "gamma", c.gamma, "must be in (0, 1]");
  if (c.max_good < 1) bad_setting("tpe search", "max_good", c.max_good, "must be >= 1");
  if (!(c.prior_weight > 0.0 && std::isfinite(c.prior_weight)))
    bad_setting("tpe search", "prior_weight", c.prior_weight, "must be > 0");
}

namespace {

std::vector<double> scaled(const ParamSpec& spec, std::span<const double> genes) {
  std::vector<double> out;
  for (const double v : genes)
    out.push_back(spec.kind == ParamKind::integer ? v : to_search_scale(spec, v));
  return out;
}

std::vector<std::size_t> indices(std::span<const double> genes) {
  std::vector<std::size_t> out;
  for (const double g : genes) out.push_back(static_cast<std::size_t>(std::llround(g)));
  return out;
}

double interval_lo(const ParamSpec& spec) {
  return spec.kind == ParamKind::integer ? spec.lo - 0.5 : to_search_scale(spec, spec.lo);
}

double interval_hi(const ParamSpec& spec) {
  return spec.kind == ParamKind::integer ? spec.hi + 0.5 : to_search_scale(spec, spec.hi);
}

// A genome as a point of the joint density: each gene in its parameter's search scale (a choice's
// index as it is), and back.
std::vector<JointDim> joint_dims(const std::vector<ParamSpec>& specs) {
  std::vector<JointDim> dims;
  dims.reserve(specs.size());
  for (const ParamSpec& p : specs)
    dims.push_back(p.kind == ParamKind::choice ? JointDim{0.0, 0.0, p.choices.size()}
                                               : JointDim{interval_lo(p), interval_hi(p), 0});
  return dims;
}

std::vector<double> joint_point(const std::vector<ParamSpec>& specs, const Genome& genome) {
  std::vector<double> x;
  for (std::size_t k = 0; k < specs.size(); ++k)
    x.push_back(specs[k].kind == ParamKind::integer || specs[k].kind == ParamKind::choice
                    ? genome[k]
                    : to_search_scale(specs[k], genome[k]));
  return x;
}

Genome joint_genome(const std::vector<ParamSpec>& specs, const std::vector<double>& x) {
  Genome genome;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const ParamSpec& p = specs[k];
    if (p.kind == ParamKind::choice)
      genome.push_back(x[k]);
    else
      genome.push_back(clamp_value(
          p, p.kind == ParamKind::integer ? std::round(x[k]) : from_search_scale(p, x[k])));
  }
  return genome;
}

}  // namespace

ParamDensities::ParamDensities(const ParamSpec& spec, std::span<const double> good,
                               std::span<const double> bad, double prior_weight)
    : spec_(spec) {
  if (spec.kind == ParamKind::choice) {
    good_choice_ = categorical_weights(indices(good), spec.choices.size(), prior_weight);
    bad_choice_ = categorical_weights(indices(bad), spec.choices.size(), prior_weight);
    return;
  }
  good_.emplace(scaled(spec, good), interval_lo(spec), interval_hi(spec), prior_weight);
  bad_.emplace(scaled(spec, bad), interval_lo(spec), interval_hi(spec), prior_weight);
}

double ParamDensities::log_ratio(double gene) const {
  if (spec_.kind == ParamKind::choice) {
    const auto c = static_cast<std::size_t>(std::llround(gene));
    return std::log(good_choice_[c]) - std::log(bad_choice_[c]);
  }
  const double x = spec_.kind == ParamKind::integer ? gene : to_search_scale(spec_, gene);
  return good_->log_pdf(x) - bad_->log_pdf(x);
}

double ParamDensities::sample_good(Rng& rng) const {
  if (spec_.kind == ParamKind::choice) {
    double u = rng.uniform_double();
    std::size_t c = 0;
    while (c + 1 < good_choice_.size() && u >= good_choice_[c]) u -= good_choice_[c++];
    return static_cast<double>(c);
  }
  const double x = good_->sample(rng);
  return clamp_value(
      spec_, spec_.kind == ParamKind::integer ? std::round(x) : from_search_scale(spec_, x));
}

namespace {

double choose(const ParamDensities& densities, int candidates, Rng& rng) {
  double best = 0.0, best_score = -INFINITY;
  for (int i = 0; i < candidates; ++i) {
    const double gene = densities.sample_good(rng);
    const double score = densities.log_ratio(gene);
    if (score > best_score) best = gene, best_score = score;
  }
  return best;
}

}  // namespace

double tpe_choose(const ParamSpec& spec, std::span<const double> good, std::span<const double> bad,
                  const TpeConfig& config, Rng& rng) {
  return choose(ParamDensities(spec, good, bad, config.prior_weight), config.candidates, rng);
}

TpeModel::TpeModel(const SearchSpace& space, std::span<const Trial> trials, Direction direction,
                   const TpeConfig& config) {
  // Results best first (the earliest among equals); failures and trials in flight are bad.
  std::vector<const Trial*> ranked, rest;
  for (const Trial& t : trials) {
    if (t.cached()) continue;
    (t.reported && !t.failed ? ranked : rest).push_back(&t);
  }
  if (ranked.empty()) return;
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Trial* a, const Trial* b) {
    return better(a->fitness, b->fitness, direction);
  });
  const std::size_t n = ranked.size() + rest.size();
  const std::size_t good =
      std::min(ranked.size(),
               std::max<std::size_t>(
                   1, good_count(n, config.gamma, static_cast<std::size_t>(config.max_good))));
  if (config.multivariate) {
    specs_ = space.params;
    std::vector<std::vector<double>> good_rows, bad_rows;
    for (std::size_t i = 0; i < ranked.size(); ++i)
      (i < good ? good_rows : bad_rows).push_back(joint_point(specs_, ranked[i]->genome));
    for (const Trial* t : rest) bad_rows.push_back(joint_point(specs_, t->genome));
    good_joint_.emplace(joint_dims(specs_), good_rows, config.prior_weight);
    bad_joint_.emplace(joint_dims(specs_), bad_rows, config.prior_weight);
    return;
  }
  for (std::size_t k = 0; k < space.params.size(); ++k) {
    std::vector<double> good_genes, bad_genes;
    for (std::size_t i = 0; i < ranked.size(); ++i)
      (i < good ? good_genes : bad_genes).push_back(ranked[i]->genome[k]);
    for (const Trial* t : rest) bad_genes.push_back(t->genome[k]);
    params_.emplace_back(space.params[k], good_genes, bad_genes, config.prior_weight);
  }
}

Genome TpeModel::propose(int candidates, Rng& rng) const {
  Genome genome;
  if (good_joint_) {
    double best_score = -INFINITY;
    for (int i = 0; i < candidates; ++i) {
      const Genome candidate = joint_genome(specs_, good_joint_->sample(rng));
      const double s = score(candidate);
      if (i == 0 || s > best_score) genome = candidate, best_score = s;
    }
    return genome;
  }
  for (const ParamDensities& p : params_) genome.push_back(choose(p, candidates, rng));
  return genome;
}

double TpeModel::score(const Genome& genome) const {
  if (good_joint_) {
    const std::vector<double> x = joint_point(specs_, genome);
    return good_joint_->log_pdf(x) - bad_joint_->log_pdf(x);
  }
  double sum = 0.0;
  for (std::size_t k = 0; k < params_.size(); ++k) sum += params_[k].log_ratio(genome[k]);
  return sum;
}

namespace {

const TpeConfig& validated(const TpeConfig& c) {
  validate(c);
  return c;
}

}  // namespace

TpeSearch::TpeSearch(SearchSpace space, TpeConfig config)
    : ModelSearch(std::move(space), validated(config), {hpo_tpe, false}), config_(config) {}

Genome TpeSearch::model_proposal(Rng& rng) const {
  const TpeModel model(space(), trials(), direction(), config_);
  return model.propose(config_.candidates, rng);
}

}  // namespace strata
