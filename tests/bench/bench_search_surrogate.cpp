// Trainings to a target accuracy of strata's GP search against random search (400 trainings, the
// same seeds, in the same run) on a surrogate of the Fashion-MNIST search objective
// (tests/bench/fit_search_surrogate.py): hundreds of seeds in minutes where the real bench trains
// 80 networks per seed, for telling search variants apart.
//
//   strata_bench_search_surrogate SURROGATE [--seeds N] [--first S] [--groups G] [--trials T]
//                                 [--startup K] [--noise SD] [--config CONFIG] [--per-seed CSV]
//
// CONFIG (default configs/fashion_hpo.yaml) gives the search space. --per-seed writes each seed's
// trainings to each target (a miss as trials + 1), so that runs split over seeds (--first) on
// several cores can be pooled.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/config.hpp"
#include "core/measurement.hpp"
#include "core/rng.hpp"
#include "hpo/gp_search.hpp"
#include "hpo/random_search.hpp"

namespace {

using namespace strata;

// One fully connected network: SiLU between layers, none after the last.
struct Network {
  struct Dense {
    int outputs = 0, inputs = 0;
    std::vector<double> weights, bias;  // weights row-major [outputs][inputs]
  };
  std::vector<Dense> layers;

  double operator()(std::vector<double> x) const {
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const Dense& d = layers[l];
      std::vector<double> y(static_cast<std::size_t>(d.outputs));
      for (int o = 0; o < d.outputs; ++o) {
        double s = d.bias[static_cast<std::size_t>(o)];
        for (int i = 0; i < d.inputs; ++i)
          s += d.weights[static_cast<std::size_t>(o * d.inputs + i)] *
               x[static_cast<std::size_t>(i)];
        y[static_cast<std::size_t>(o)] = l + 1 < layers.size() ? s / (1.0 + std::exp(-s)) : s;
      }
      x = std::move(y);
    }
    return x.at(0);
  }
};

std::vector<Network> read_surrogate(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the surrogate " + path);
  const auto bad = [&](const std::string& why) {
    return std::runtime_error(path + " is not a surrogate of the 7-parameter search: " + why);
  };
  int networks = 0;
  in >> networks;
  if (!in || networks < 1) throw bad("no networks");
  std::vector<Network> out(static_cast<std::size_t>(networks));
  for (Network& n : out) {
    int layers = 0;
    in >> layers;
    if (!in || layers < 1) throw bad("a network without layers");
    n.layers.resize(static_cast<std::size_t>(layers));
    int width = 7;  // the inputs the next layer must take
    for (Network::Dense& d : n.layers) {
      in >> d.outputs >> d.inputs;
      if (!in || d.inputs != width || d.outputs < 1) throw bad("layer sizes do not chain");
      width = d.outputs;
      d.weights.resize(static_cast<std::size_t>(d.outputs) * static_cast<std::size_t>(d.inputs));
      d.bias.resize(static_cast<std::size_t>(d.outputs));
      for (double& w : d.weights) in >> w;
      for (double& b : d.bias) in >> b;
    }
    if (!in || width != 1) throw bad("a network without one output");
  }
  return out;
}

// The config's search space, checked to be the surrogate's: its seven parameters in its order, each
// of which the GP's unit cube (UnitEncoding) maps onto one input, as fit_search_surrogate.py's
// unit_point does.
SearchSpace surrogate_space(const std::string& config_path) {
  SearchSpace space;
  space.params = search_space(load_config(config_path));
  std::vector<std::string> names;
  for (const ParamSpec& p : space.params) names.push_back(p.name);
  const std::vector<std::string> expected{"lr",     "momentum", "weight_decay", "units1",
                                          "units2", "dropout",  "batch"};
  if (names != expected || UnitEncoding(space).dims() != expected.size())
    throw std::runtime_error(config_path + " does not search the surrogate's parameters (" +
                             fmt::format("{}", fmt::join(expected, ", ")) + ")");
  return space;
}

// The surrogate objective: the networks' median at a genome's point of the unit cube, capped at the
// best accuracy in the fitted trainings (0.8555).
struct Surrogate {
  std::vector<Network> networks;
  SearchSpace space;
  UnitEncoding unit{space};

  double accuracy(const Genome& g) const {
    std::vector<double> values;
    for (const Network& n : networks) values.push_back(n(unit.encode(g)));
    return std::min(median(values), 0.855);
  }
};

struct Options {
  std::string surrogate, search = "gp";             // search: gp or random
  std::string config = "configs/fashion_hpo.yaml";  // whose space the surrogate models
  std::string per_seed;  // a CSV of each seed's trainings to each target, for pooling runs
  int seeds = 200, first = 1, groups = 2, trials = 80, startup = GpConfig{}.startup;
  double noise = 0.009;  // the spread of real trainings about the surrogate above 0.8
};

std::unique_ptr<Search> make(const Options& o, const SearchSpace& space, std::uint64_t seed) {
  if (o.search == "random")
    return std::make_unique<RandomSearch>(
        space, RandomConfig{o.trials, o.groups, std::nullopt, Direction::maximize, seed});
  GpConfig c;
  c.trials = o.trials;
  c.startup = o.startup;
  c.slots = o.groups;
  c.seed = seed;
  return std::make_unique<GpSearch>(space, c);
}

// A training's result: what it measured (the surrogate plus noise) and what it would measure on
// average (the surrogate alone).
struct Result {
  double measured, expected;
};

// The results in the order they came in: `groups` trainings in flight, the next to end drawn at
// random (as on a cluster, where trainings of other batch sizes take other times).
std::vector<Result> run_search(const Options& o, const Surrogate& surrogate, std::uint64_t seed) {
  const std::unique_ptr<Search> search = make(o, surrogate.space, seed);
  // libstdc++'s normal_distribution: the figures in docs/benchmarks.md reproduce with the same
  // standard library.
  std::mt19937_64 noise_stream(seed * 7919);
  std::normal_distribution<double> noise(0.0, o.noise);
  Rng order(seed * 31 + 7);
  std::vector<Trial> in_flight;
  std::vector<Result> results;
  while (!search->done()) {
    for (const Trial& t : search->next_batch()) in_flight.push_back(t);
    if (in_flight.empty()) break;
    const auto pick = static_cast<std::size_t>(order.uniform_double() * in_flight.size());
    const Trial t = in_flight[pick];
    in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(pick));
    const double expected = surrogate.accuracy(t.genome);
    const double y = expected + noise(noise_stream);
    search->report(t.id, y, false);
    results.push_back({y, expected});
  }
  return results;
}

// Where a target is lost: a search first has to find the region whose expected accuracy lies a
// little below the target (most hits are trainings there with a lucky spread), then train there
// until one draws it. Per seed: the trainings to the first in the region, and the share of the
// region among the trainings after it, up to the first hit or the budget's end.
constexpr double region = 0.815;

// The searches' outcomes over the seeds: for each target the trainings each seed needed to reach
// it (a miss counts as trials + 1, past the budget, as in run_hpo_fashion_bench.sh), and the two
// steps to targets.front().
struct Outcomes {
  std::vector<std::vector<double>> to_target;
  std::vector<double> to_region, region_share_after;
};

Outcomes run_seeds(const std::vector<double>& targets, const Options& o,
                   const Surrogate& surrogate) {
  Outcomes out{std::vector<std::vector<double>>(targets.size()), {}, {}};
  const auto miss = static_cast<std::ptrdiff_t>(o.trials);  // the index one past the budget
  for (int seed = o.first; seed < o.first + o.seeds; ++seed) {
    const std::vector<Result> results = run_search(o, surrogate, static_cast<std::uint64_t>(seed));
    std::vector<std::ptrdiff_t> hits;
    for (const double target : targets) {
      const auto hit = std::find_if(results.begin(), results.end(),
                                    [&](const Result& r) { return r.measured >= target; });
      hits.push_back(hit == results.end() ? miss : hit - results.begin());
    }
    for (std::size_t k = 0; k < targets.size(); ++k)
      out.to_target[k].push_back(static_cast<double>(hits[k] + 1));
    const auto found = std::find_if(results.begin(), results.end(),
                                    [](const Result& r) { return r.expected >= region; });
    const std::ptrdiff_t first = found == results.end() ? miss : found - results.begin();
    out.to_region.push_back(static_cast<double>(first + 1));
    // The trainings after the first in the region, up to the first hit (included) or the end.
    const std::ptrdiff_t last = std::min<std::ptrdiff_t>(hits.front(), miss - 1);
    if (first < last) {
      const auto in_region = std::count_if(results.begin() + first + 1, results.begin() + last + 1,
                                           [](const Result& r) { return r.expected >= region; });
      out.region_share_after.push_back(static_cast<double>(in_region) /
                                       static_cast<double>(last - first));
    }
  }
  return out;
}

int run(const Options& gp) {
  Options random = gp;
  random.search = "random";
  random.groups = 1;
  random.trials = 400;
  const Surrogate surrogate{read_surrogate(gp.surrogate), surrogate_space(gp.config)};
  const std::vector<double> targets{0.825, 0.83, 0.835};
  const Outcomes gp_out = run_seeds(targets, gp, surrogate);
  const Outcomes random_out = run_seeds(targets, random, surrogate);
  const auto& gp_to = gp_out.to_target;
  const auto& random_to = random_out.to_target;
  if (!gp.per_seed.empty()) {
    std::ofstream csv(gp.per_seed);
    csv << "seed,target,gp,random\n";
    for (std::size_t k = 0; k < targets.size(); ++k)
      for (std::size_t i = 0; i < gp_to[k].size(); ++i)
        csv << fmt::format("{},{},{},{}\n", gp.first + static_cast<int>(i), targets[k], gp_to[k][i],
                           random_to[k][i]);
    if (!csv) throw std::runtime_error("cannot write " + gp.per_seed);
  }
  fmt::print(
      "Trainings to a target on the surrogate ({}), seeds {}-{}, noise {}: the GP search on {} "
      "member group(s) with {} trials ({} startup) against random search with 400.\n\n",
      gp.surrogate, gp.first, gp.first + gp.seeds - 1, gp.noise, gp.groups, gp.trials, gp.startup);
  fmt::print(
      "| target | GP: reached in | GP: median | GP: by training 16 | random: median | random / GP "
      "|\n");
  fmt::print("| --- | --- | --- | --- | --- | --- |\n");
  for (std::size_t k = 0; k < targets.size(); ++k) {
    const auto& v = gp_to[k];
    const auto reached =
        std::count_if(v.begin(), v.end(), [&](double n) { return n <= gp.trials; });
    const auto by16 = std::count_if(v.begin(), v.end(), [](double n) { return n <= 16; });
    const double gp_median = median(v), random_median = median(random_to[k]);
    // Past the budget the median is a miss, not a count, and no ratio holds.
    const bool gp_missed = gp_median > gp.trials, random_missed = random_median > random.trials;
    fmt::print(
        "| {:.3f} | {} of {} | {} | {} of {} | {} | {} |\n", targets[k], reached, v.size(),
        gp_missed ? fmt::format("> {}", gp.trials) : fmt::format("{}", gp_median), by16, v.size(),
        random_missed ? fmt::format("> {}", random.trials) : fmt::format("{}", random_median),
        gp_missed || random_missed ? std::string("-")
                                   : fmt::format("{:.2f}", random_median / gp_median));
  }
  fmt::print(
      "\nThe two steps to {:.3f}: finding the region of expected accuracy {} or more, then "
      "training there until a training draws the target (the share of the region among the "
      "trainings after the first in it, up to the first hit or the budget's end; seeds with such "
      "trainings).\n\n",
      targets.front(), region);
  fmt::print(
      "| search | trainings to the region: median | in it by training 10 / 16 | region's share "
      "after: median | mean |\n");
  fmt::print("| --- | --- | --- | --- | --- |\n");
  for (const auto& [name, out] :
       {std::pair<const char*, const Outcomes*>{"GP", &gp_out}, {"random", &random_out}}) {
    const auto& v = out->to_region;
    const auto by = [&](double n) {
      return std::count_if(v.begin(), v.end(), [&](double t) { return t <= n; });
    };
    const auto& share = out->region_share_after;
    const double mean_share = share.empty() ? 0.0
                                            : std::accumulate(share.begin(), share.end(), 0.0) /
                                                  static_cast<double>(share.size());
    fmt::print("| {} | {} | {} / {} of {} | {:.2f} | {:.2f} |\n", name, median(v), by(10), by(16),
               v.size(), share.empty() ? 0.0 : median(share), mean_share);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "strata's GP search against random search (400 trainings, the same seeds) on a surrogate "
      "of the Fashion-MNIST search objective (tests/bench/fit_search_surrogate.py fits one)"};
  app.add_option("surrogate", o.surrogate, "the fitted networks (tests/bench/surrogates/)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--config", o.config, "the config whose search space the surrogate models")
      ->check(CLI::ExistingFile);
  app.add_option("--seeds", o.seeds, "seeds per search")->check(CLI::PositiveNumber);
  app.add_option("--first", o.first, "the first seed");
  app.add_option("--groups", o.groups, "member groups: GP trainings in flight")
      ->check(CLI::PositiveNumber);
  app.add_option("--trials", o.trials, "the GP search's budget")->check(CLI::PositiveNumber);
  app.add_option("--startup", o.startup, "the GP search's startup trials")
      ->check(CLI::PositiveNumber);
  app.add_option("--noise", o.noise, "sd of the noise added to the surrogate's accuracy")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--per-seed", o.per_seed,
                 "write each seed's trainings to each target to this CSV");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_bench_search_surrogate: %s\n", e.what());
    return 2;
  }
}
