#include "hpo/gp_search.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "hpo/bad_setting.hpp"
#include "hpo/gaussian_process.hpp"

namespace strata {

void validate(const GpConfig& c) {
  validate(static_cast<const ModelSearchConfig&>(c), "gp search");
  if (c.candidates < 1) bad_setting("gp search", "candidates", c.candidates, "must be >= 1");
  if (c.fit_iterations < 1)
    bad_setting("gp search", "fit_iterations", c.fit_iterations, "must be >= 1");
  if (c.max_observations < 2)
    bad_setting("gp search", "max_observations", c.max_observations, "must be >= 2");
}

namespace {

// Whether a choice's values are numbers in strictly increasing or decreasing order.
bool ordered_numbers(const std::vector<std::string>& choices) {
  std::vector<double> values;
  for (const std::string& c : choices) {
    std::size_t used = 0;
    try {
      values.push_back(std::stod(c, &used));
    } catch (const std::exception&) {
      return false;
    }
    if (used != c.size()) return false;
  }
  const auto increasing = std::adjacent_find(values.begin(), values.end(), std::greater_equal<>());
  const auto decreasing = std::adjacent_find(values.begin(), values.end(), std::less_equal<>());
  return increasing == values.end() || decreasing == values.end();
}

// A parameter's span in its search scale: [lo, hi], or [0, k - 1] for an ordered choice.
std::pair<double, double> span_of(const ParamSpec& p) {
  if (p.kind == ParamKind::choice) return {0.0, static_cast<double>(p.choices.size()) - 1.0};
  return {to_search_scale(p, p.lo), to_search_scale(p, p.hi)};
}

}  // namespace

UnitEncoding::UnitEncoding(const SearchSpace& space) : specs_(space.params) {
  for (const ParamSpec& p : specs_) {
    const bool one_hot = p.kind == ParamKind::choice && !ordered_numbers(p.choices);
    one_hot_.push_back(one_hot);
    dims_ += one_hot ? p.choices.size() : 1;
  }
}

std::vector<double> UnitEncoding::encode(const Genome& genome) const {
  std::vector<double> point;
  for (std::size_t k = 0; k < specs_.size(); ++k) {
    const ParamSpec& p = specs_[k];
    if (one_hot_[k]) {
      for (std::size_t c = 0; c < p.choices.size(); ++c)
        point.push_back(static_cast<double>(std::llround(genome[k])) == static_cast<double>(c));
      continue;
    }
    const auto [lo, hi] = span_of(p);
    const double x = p.kind == ParamKind::choice ? genome[k] : to_search_scale(p, genome[k]);
    point.push_back(hi > lo ? std::clamp((x - lo) / (hi - lo), 0.0, 1.0) : 0.5);
  }
  return point;
}

Genome UnitEncoding::decode(std::span<const double> point) const {
  Genome genome;
  std::size_t at = 0;
  for (std::size_t k = 0; k < specs_.size(); ++k) {
    const ParamSpec& p = specs_[k];
    if (one_hot_[k]) {
      const auto first = point.begin() + static_cast<std::ptrdiff_t>(at);
      const auto chosen =
          std::max_element(first, first + static_cast<std::ptrdiff_t>(p.choices.size()));
      genome.push_back(static_cast<double>(chosen - first));
      at += p.choices.size();
      continue;
    }
    const auto [lo, hi] = span_of(p);
    const double x = lo + std::clamp(point[at++], 0.0, 1.0) * (hi - lo);
    genome.push_back(clamp_value(p, p.kind == ParamKind::choice ? x : from_search_scale(p, x)));
  }
  return genome;
}

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) return p == 0.0 ? -INFINITY : p == 1.0 ? INFINITY : NAN;
  // Acklam's rational approximation (relative error 1.2e-9), then one Halley step on erfc.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  const double tail = 0.02425;
  double x;
  if (p < tail || p > 1.0 - tail) {
    const double q = std::sqrt(-2.0 * std::log(p < tail ? p : 1.0 - p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    if (p > tail) x = -x;
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  }
  const double e = 0.5 * std::erfc(-x / std::numbers::sqrt2) - p;
  const double u = e * std::sqrt(2.0 * std::numbers::pi) * std::exp(0.5 * x * x);
  return x - u / (1.0 + 0.5 * x * u);
}

std::vector<double> normal_scores(std::span<const double> values) {
  const std::size_t n = values.size();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> scores(n);
  for (std::size_t begin = 0; begin < n;) {
    std::size_t end = begin + 1;
    while (end < n && values[order[end]] == values[order[begin]]) ++end;
    const double mean_rank = 0.5 * static_cast<double>(begin + end - 1);
    for (std::size_t i = begin; i < end; ++i)
      scores[order[i]] = normal_quantile((mean_rank + 0.5) / static_cast<double>(n));
    begin = end;
  }
  return scores;
}

namespace {

const GpConfig& validated(const GpConfig& c) {
  validate(c);
  return c;
}

// A point moved by a Gaussian step of `sigma` in each coordinate, kept in the unit cube.
std::vector<double> perturbed(std::vector<double> point, double sigma, Rng& rng) {
  for (double& x : point) x = std::clamp(x + sigma * static_cast<double>(rng.normal()), 0.0, 1.0);
  return point;
}

}  // namespace

std::vector<std::vector<double>> face_projections(const std::vector<double>& point) {
  std::vector<std::vector<double>> out;
  for (std::size_t j = 0; j < point.size(); ++j)
    for (const double face : {0.0, 1.0}) {
      out.push_back(point);
      out.back()[j] = face;
    }
  return out;
}

GpSearch::GpSearch(SearchSpace space, GpConfig config)
    : ModelSearch(std::move(space), validated(config), {hpo_gp, config.latin_startup}),
      config_(config),
      encoding_(this->space()) {}

std::vector<const Trial*> gp_observations(std::span<const Trial> trials, Direction direction,
                                          int most) {
  std::vector<const Trial*> reported;
  for (const Trial& t : trials)
    if (t.reported && !t.cached()) reported.push_back(&t);
  if (static_cast<int>(reported.size()) <= most) return reported;
  std::vector<const Trial*> ranked = reported;
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Trial* a, const Trial* b) {
    if (a->failed != b->failed) return b->failed;
    return !a->failed && better(a->fitness, b->fitness, direction);
  });
  std::set<int> kept;
  for (int i = 0; i < most / 2; ++i) kept.insert(ranked[static_cast<std::size_t>(i)]->id);
  for (auto it = reported.rbegin(); static_cast<int>(kept.size()) < most; ++it)
    kept.insert((*it)->id);
  std::vector<const Trial*> out;
  for (const Trial* t : reported)
    if (kept.contains(t->id)) out.push_back(t);
  return out;
}

double lengthscale_centre(std::size_t results, std::size_t inputs) {
  return results < short_lengthscale_results ? 0.0 : dimension_scaled_lengthscale_centre(inputs);
}

namespace {

// What a proposal models: the observed trainings (encoded, with their fitness made larger-is-better
// and failures tied with the worst success), the trainings in flight, and every genome tried.
struct Observations {
  std::vector<std::vector<double>> inputs, pending;
  std::vector<double> fitness;
  std::set<Genome> taken;
};

Observations observations_of(std::span<const Trial> trials, Direction direction,
                             const UnitEncoding& encoding, int most) {
  Observations o;
  const double sign = direction == Direction::maximize ? 1.0 : -1.0;
  for (const Trial& t : trials) {
    if (t.cached()) continue;
    o.taken.insert(t.genome);
    if (!t.reported) o.pending.push_back(encoding.encode(t.genome));
  }
  double worst = INFINITY;
  for (const Trial* t : gp_observations(trials, direction, most)) {
    o.inputs.push_back(encoding.encode(t->genome));
    o.fitness.push_back(t->failed ? NAN : sign * t->fitness);
    if (!t->failed) worst = std::min(worst, sign * t->fitness);
  }
  for (double& f : o.fitness)
    if (std::isnan(f)) f = worst;
  return o;
}

// The inputs of the `count` best observations, best first.
std::vector<std::vector<double>> leaders(const Observations& o, std::size_t count) {
  std::vector<std::size_t> order(o.fitness.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return o.fitness[a] > o.fitness[b]; });
  std::vector<std::vector<double>> out;
  for (std::size_t r = 0; r < std::min(count, order.size()); ++r) out.push_back(o.inputs[order[r]]);
  return out;
}

}  // namespace

Genome GpSearch::model_proposal(Rng& rng) const {
  const Observations o =
      observations_of(trials(), direction(), encoding_, config_.max_observations);
  std::vector<std::vector<double>> inputs = o.inputs;
  std::vector<double> outputs = normal_scores(o.fitness);
  const GpHyper hyper =
      GaussianProcess::fit(inputs, outputs, config_.fit_iterations,
                           lengthscale_centre(o.fitness.size(), encoding_.dims()));
  const GaussianProcess fitted(inputs, outputs, hyper);
  double best = -INFINITY;
  for (const auto& x : inputs) best = std::max(best, fitted.mean(x));
  for (const auto& x : o.pending) {
    outputs.push_back(fitted.mean(x));
    inputs.push_back(x);
  }
  const GaussianProcess believed(std::move(inputs), std::move(outputs), hyper);

  // Every candidate is scored at its legal genome; a genome already tried scores -infinity.
  struct Scored {
    Genome genome;
    double score;
  };
  const auto score = [&](std::span<const double> point) {
    Scored s{encoding_.decode(point), -INFINITY};
    if (o.taken.contains(s.genome)) return s;
    const std::vector<double> x = encoding_.encode(s.genome);
    s.score = log_expected_improvement(believed.mean(x), believed.variance(x), best);
    return s;
  };
  Scored chosen{sample(space(), rng), -INFINITY};
  std::vector<double> chosen_point = encoding_.encode(chosen.genome);
  const auto consider = [&](const std::vector<double>& point) {
    Scored s = score(point);
    if (s.score > chosen.score) chosen = std::move(s), chosen_point = point;
  };
  for (int i = 0; i < config_.candidates; ++i) consider(encoding_.encode(sample(space(), rng)));
  // Around the best results, where the improvement is likeliest.
  for (const auto& leader : leaders(o, 5)) {
    for (int i = 0; i < config_.candidates / 10; ++i) consider(perturbed(leader, 0.1, rng));
    for (const auto& point : face_projections(leader)) consider(point);
  }
  // Local refinement of the best candidate with shrinking steps.
  for (int i = 0; i < 100; ++i) consider(perturbed(chosen_point, 0.1 * std::pow(0.97, i), rng));
  return chosen.genome;
}

}  // namespace strata
