#include "hpo/tpe_search.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace strata {

void validate(const TpeConfig& c) {
  auto bad = [](const char* name, double value, const char* rule) {
    throw std::invalid_argument(fmt::format("tpe search: {} = {} ({})", name, value, rule));
  };
  if (c.trials < 1) bad("trials", c.trials, "must be >= 1");
  if (c.startup < 1) bad("startup", c.startup, "must be >= 1");
  if (c.candidates < 1) bad("candidates", c.candidates, "must be >= 1");
  if (!(c.gamma > 0.0 && c.gamma <= 1.0)) bad("gamma", c.gamma, "must be in (0, 1]");
  if (c.max_good < 1) bad("max_good", c.max_good, "must be >= 1");
  if (!(c.prior_weight > 0.0 && std::isfinite(c.prior_weight)))
    bad("prior_weight", c.prior_weight, "must be > 0");
  if (c.slots < 1) bad("slots", c.slots, "must be >= 1");
}

double tpe_choose(const ParamSpec& spec, std::span<const double> good, std::span<const double> bad,
                  const TpeConfig& config, Rng& rng) {
  if (spec.kind == ParamKind::choice) {
    const std::size_t k = spec.choices.size();
    auto indices = [](std::span<const double> genes) {
      std::vector<std::size_t> out;
      for (const double g : genes) out.push_back(static_cast<std::size_t>(std::llround(g)));
      return out;
    };
    const auto l = categorical_weights(indices(good), k, config.prior_weight);
    const auto g = categorical_weights(indices(bad), k, config.prior_weight);
    std::size_t best = 0;
    double best_score = -INFINITY;
    for (int i = 0; i < config.candidates; ++i) {
      double u = rng.uniform_double();
      std::size_t c = 0;
      while (c + 1 < k && u >= l[c]) u -= l[c++];
      const double score = std::log(l[c]) - std::log(g[c]);
      if (score > best_score) best = c, best_score = score;
    }
    return static_cast<double>(best);
  }
  const bool integer = spec.kind == ParamKind::integer;
  const double lo = integer ? spec.lo - 0.5 : to_search_scale(spec, spec.lo);
  const double hi = integer ? spec.hi + 0.5 : to_search_scale(spec, spec.hi);
  auto scaled = [&](std::span<const double> genes) {
    std::vector<double> out;
    for (const double v : genes) out.push_back(integer ? v : to_search_scale(spec, v));
    return out;
  };
  const Parzen l(scaled(good), lo, hi, config.prior_weight);
  const Parzen g(scaled(bad), lo, hi, config.prior_weight);
  double best = 0.0, best_score = -INFINITY;
  for (int i = 0; i < config.candidates; ++i) {
    const double x = l.sample(rng);
    const double score = l.log_pdf(x) - g.log_pdf(x);
    if (score > best_score) best = x, best_score = score;
  }
  return clamp_value(spec, integer ? std::round(best) : from_search_scale(spec, best));
}

namespace {

SearchLimits tpe_limits(const TpeConfig& c) {
  validate(c);
  return {0, c.max_epochs, c.target};
}

}  // namespace

TpeSearch::TpeSearch(SearchSpace space, TpeConfig config)
    : Search(std::move(space), config.direction, tpe_limits(config)), config_(config) {}

Genome TpeSearch::model_proposal(Rng& rng) const {
  // Results best first (the earliest among equals); failures and trials in flight are bad.
  std::vector<const Trial*> ranked, rest;
  for (const Trial& t : trials()) {
    if (t.cached()) continue;
    (t.reported && !t.failed ? ranked : rest).push_back(&t);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Trial* a, const Trial* b) {
    return better(a->fitness, b->fitness, direction());
  });
  const std::size_t n = ranked.size() + rest.size();
  const std::size_t good =
      std::min(ranked.size(),
               std::max<std::size_t>(
                   1, good_count(n, config_.gamma, static_cast<std::size_t>(config_.max_good))));
  Genome genome(space().params.size());
  for (std::size_t k = 0; k < genome.size(); ++k) {
    std::vector<double> good_genes, bad_genes;
    for (std::size_t i = 0; i < ranked.size(); ++i)
      (i < good ? good_genes : bad_genes).push_back(ranked[i]->genome[k]);
    for (const Trial* t : rest) bad_genes.push_back(t->genome[k]);
    genome[k] = tpe_choose(space().params[k], good_genes, bad_genes, config_, rng);
  }
  return genome;
}

std::vector<Search::Proposal> TpeSearch::propose(int max_count) {
  if (max_count < 1 || !finished_reason().empty()) return {};
  Rng rng(derive_seed(config_.seed, {seed_hpo, hpo_tpe, static_cast<std::uint64_t>(proposed_)}));
  ++proposed_;
  const int generation = read_ / config_.slots;
  // The model needs a success to call good.
  const bool model =
      read_ >= config_.startup && std::any_of(trials().begin(), trials().end(), [](const Trial& t) {
        return t.reported && !t.failed && !t.cached();
      });
  return {{model ? model_proposal(rng) : sample(space(), rng), generation, 0, 1.0}};
}

void TpeSearch::absorb(std::span<const Trial> batch) {
  for (const Trial& t : batch) {
    ++read_;
    since_line_.push_back(t);
  }
  const bool last = outstanding() == 0 && (limits_reached() || !finished_reason().empty());
  if (static_cast<int>(since_line_.size()) >= config_.slots || (last && !since_line_.empty())) {
    std::vector<double> fitness;
    for (const Trial& t : since_line_) fitness.push_back(t.fitness);
    record_generation(static_cast<int>(history().size()), fitness, since_line_);
    since_line_.clear();
  }
}

std::string TpeSearch::finished_reason() const {
  return proposed_ >= config_.trials ? "exhausted" : "";
}

}  // namespace strata
