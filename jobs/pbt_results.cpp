#include "jobs/pbt_results.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "hpo/genetic_operators.hpp"
#include "hpo/journal_rows.hpp"
#include "hpo/pbt_log.hpp"
#include "jobs/hpo_trial.hpp"

namespace strata {

namespace {

// hpo_summary.json's "generations": each round's best, mean and failures, as a search's are.
nlohmann::json rounds_json(const PbtPopulation& population, int members) {
  nlohmann::json rounds = nlohmann::json::array();
  double best_so_far = std::nan("");
  for (const PbtRound& r : population.history()) {
    const auto ranked = rank_order(r.scores, population.config().direction);
    double sum = 0;
    int failed = 0;
    for (double s : r.scores) {
      if (std::isnan(s))
        ++failed;
      else
        sum += s;
    }
    const double round_best = r.scores[ranked.front()];
    if (std::isnan(best_so_far) || better(round_best, best_so_far, population.config().direction))
      best_so_far = round_best;
    rounds.push_back(
        {{"generation", r.round},
         {"evaluated", members},
         {"failed", failed},
         {"best", number_or_null(round_best)},
         {"mean", number_or_null(failed < members ? sum / (members - failed) : std::nan(""))},
         {"best_so_far", number_or_null(best_so_far)},
         {"trainings", members}});
  }
  return rounds;
}

}  // namespace

void publish_pbt_results(const Config& config, const HpoSpec& spec, const SearchSpace& space,
                         const PbtPopulation& population, double wall_seconds) {
  const std::filesystem::path dir = config.output.dir;
  const int members = spec.population;
  auto member_dir = [&](int m) { return dir / "members" / std::to_string(m); };
  const PbtRound& last = population.history().back();
  const auto order = rank_order(last.scores, population.config().direction);
  const int best = static_cast<int>(order.front());
  for (int m = 0; m < members; ++m)
    write_text_atomically(
        member_dir(m) / "config.yaml",
        trial_config_text(config, trial_values(space, last.genomes[static_cast<std::size_t>(m)]),
                          member_dir(m).string()));
  std::error_code ec;
  std::filesystem::copy_file(member_dir(best) / "config.yaml", dir / "best.yaml",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (!ec)
    std::filesystem::copy_file(member_dir(best) / "weights.h5", dir / "best_weights.h5",
                               std::filesystem::copy_options::overwrite_existing, ec);
  if (ec)
    throw DataError(fmt::format("cannot copy member {}'s results into {}: {}", best, dir.string(),
                                ec.message()));
  auto member_json = [&](int m) {
    const auto at = static_cast<std::size_t>(m);
    return nlohmann::json{{"trial", PbtLog::segment(last.round, m, members)},
                          {"member", m},
                          {"fitness", number_or_null(last.scores[at])},
                          {"params", params_of(space, last.genomes[at])}};
  };
  nlohmann::json summary;
  summary["algorithm"] = "pbt";
  summary["trainings"] = members;
  summary["cached"] = 0;
  summary["epochs"] = members * config.training.epochs;
  summary["wall_seconds"] = wall_seconds;
  summary["stop_reason"] = "rounds";
  summary["direction"] = spec.maximize ? "maximize" : "minimize";
  summary["trainings_to_target"] = nullptr;
  summary["best"] = member_json(best);
  summary["best"]["generation"] = last.round;
  summary["best"]["config"] = "best.yaml";
  summary["best"]["weights"] = "best_weights.h5";
  summary["best"]["lineage"] = nlohmann::json::array();
  for (const auto& [round, member] : population.lineage(best))
    summary["best"]["lineage"].push_back(
        {{"round", round},
         {"member", member},
         {"params", params_of(space, population.history()[static_cast<std::size_t>(round - 1)]
                                         .genomes[static_cast<std::size_t>(member)])}});
  summary["top"] = nlohmann::json::array();
  // A member that diverged in the last round has no weights: it is not among the top.
  for (std::size_t k = 0; k < order.size() && static_cast<int>(k) < spec.keep_top &&
                          !std::isnan(last.scores[order[k]]);
       ++k) {
    const int m = static_cast<int>(order[k]);
    auto item = member_json(m);
    item["config"] = fmt::format("members/{}/config.yaml", m);
    item["weights"] = fmt::format("members/{}/weights.h5", m);
    summary["top"].push_back(item);
  }
  summary["generations"] = rounds_json(population, members);
  write_text_atomically(dir / "hpo_summary.json", summary.dump(2) + '\n');
  fmt::print("[pbt] best: member {} ({} {:.4g}) with {}; weights {}, config {}\n", best,
             spec.fitness, last.scores[order.front()], describe(space, last.genomes[order.front()]),
             (dir / "best_weights.h5").string(), (dir / "best.yaml").string());
  std::fflush(stdout);
}

}  // namespace strata
