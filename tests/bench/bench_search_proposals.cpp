// What a proposal of the model-based searches costs as results pile up: the Gaussian-process
// search against TPE on the same 7-dimensional function, one training in flight, timed per
// proposal; the GP fit grows with the cube of the results up to its max_observations.
#include <chrono>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "core/measurement.hpp"
#include "hpo/gp_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/tpe_search.hpp"

namespace {

using strata::Search;

// Seconds each proposal took, by the number of results before it. A steady-state search proposes
// the next training while it takes a result, so the two are timed together.
std::vector<double> proposal_seconds(Search& search) {
  std::vector<double> seconds;
  auto batch = search.next_batch();
  while (!batch.empty()) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& t : batch) search.report(t.id, strata::sphere(t.genome));
    batch = search.next_batch();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

double median_near(const std::vector<double>& seconds, std::size_t results) {
  std::vector<double> window(seconds.begin() + static_cast<std::ptrdiff_t>(results),
                             seconds.begin() + static_cast<std::ptrdiff_t>(results + 5));
  return strata::median(window);
}

}  // namespace

int main() {
  const strata::SearchSpace space = strata::objective_space("sphere", 7);
  const int trials = 215;
  strata::GpConfig gp_config;
  gp_config.trials = trials;
  gp_config.direction = strata::Direction::minimize;
  gp_config.seed = 1;
  strata::TpeConfig tpe_config;
  tpe_config.trials = trials;
  tpe_config.direction = strata::Direction::minimize;
  tpe_config.seed = 1;
  strata::GpSearch gp(space, gp_config);
  strata::TpeSearch tpe(space, tpe_config);
  const std::vector<double> gp_s = proposal_seconds(gp), tpe_s = proposal_seconds(tpe);
  fmt::print(
      "One proposal of the GP search and of TPE, 7-dimensional sphere, median of 5 proposals\n"
      "after each number of results; CPU: {}.\n\n",
      strata::cpu_model_name());
  fmt::print(
      "| results | GP proposal ms | TPE proposal ms | GP / TPE |\n| --- | --- | --- | --- |\n");
  for (const std::size_t results : {20u, 80u, 200u, 210u}) {
    const double g = median_near(gp_s, results), t = median_near(tpe_s, results);
    fmt::print("| {} | {:.1f} | {:.2f} | {:.0f} |\n", results, 1e3 * g, 1e3 * t, g / t);
  }
  return 0;
}
