#include "jobs/search_results.hpp"

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "jobs/hpo_trial.hpp"

namespace strata {

void KeptWeights::update(const Search& search, int trial_id) {
  const Trial& t = search.trials()[static_cast<std::size_t>(trial_id)];
  on_disk_.insert(t.id);
  prune(search);
}

void KeptWeights::replayed(const Search& search) {
  for (const Trial& t : search.trials())
    if (t.reported) on_disk_.insert(t.id);
  prune(search);
}

void KeptWeights::prune(const Search& search) {
  std::set<int> kept;
  for (const Trial& t : search.top(keep_)) kept.insert(t.id);
  for (auto it = on_disk_.begin(); it != on_disk_.end();) {
    if (kept.contains(*it)) {
      ++it;
      continue;
    }
    std::error_code ignored;
    std::filesystem::remove(trials_ / std::to_string(*it) / "weights.h5", ignored);
    it = on_disk_.erase(it);
  }
}

SearchResults publish_best(const StageContext& c, const HpoSpec& spec, const Search& search) {
  const Trial best = *search.best();
  const std::filesystem::path dir(c.config.output.dir);
  SearchResults results;
  results.keep_top = spec.keep_top;
  results.best_config = "best.yaml";
  results.best_weights = "best_weights.h5";
  const std::string text = fmt::format(
      "# The best trial of the search in {} (trial {}, {} {}), as a plain config:\n"
      "#   strata run {}\n"
      "# trains it again from the start (with run.seed, not the trial's own seed). Its weights "
      "are\n"
      "# in {}.\n",
      dir.string(), best.id, spec.fitness, best.fitness, (dir / results.best_config).string(),
      (dir / results.best_weights).string());
  write_text_atomically(
      dir / results.best_config,
      text + trial_config_text(c.config, trial_values(search.space(), best.genome),
                               (dir / "best").string()));
  // Each kept trial's config, so that later stages (an ensemble of the top k) can train it again.
  for (const Trial& t : search.top(spec.keep_top)) {
    const auto trial = dir / "trials" / std::to_string(t.id);
    write_text_atomically(
        trial / "config.yaml",
        trial_config_text(c.config, trial_values(search.space(), t.genome), trial.string()));
  }
  const auto source = dir / "trials" / std::to_string(best.id) / "weights.h5";
  replace_atomically(dir / results.best_weights, [&](const std::filesystem::path& temporary) {
    std::error_code ec;
    std::filesystem::copy_file(source, temporary, std::filesystem::copy_options::overwrite_existing,
                               ec);
    if (ec)
      throw DataError(fmt::format("cannot copy the best trial's weights {} to {}: {}",
                                  source.string(), temporary.string(), ec.message()));
  });
  return results;
}

}  // namespace strata
