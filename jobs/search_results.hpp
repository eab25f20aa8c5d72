// What a finished (or running) search leaves in its directory: the weights of its keep_top best
// trials, best.yaml and best_weights.h5, and each kept trial's config.
#pragma once

#include <filesystem>
#include <set>
#include <utility>

#include "core/config.hpp"
#include "hpo/search.hpp"
#include "hpo/trial_log.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// The weights of the keep_top best trials stay in trials/<id>/weights.h5; a trial that drops out
// of them loses its weights file (its curve stays).
class KeptWeights {
 public:
  KeptWeights(std::filesystem::path trials, int keep) : trials_(std::move(trials)), keep_(keep) {}
  // After the result of `trial_id` came in.
  void update(const Search& search, int trial_id);
  // After a resumed search replayed its journal: every trial done may have weights.
  void replayed(const Search& search);

 private:
  void prune(const Search& search);

  std::filesystem::path trials_;
  int keep_;
  std::set<int> on_disk_;
};

// On world rank 0, when the search is done: best.yaml (the config with the best values, runnable
// as it is) and best_weights.h5 in the search's directory, and each of the keep_top best trials'
// config.yaml (what an ensemble of hpo.top_k trains again).
SearchResults publish_best(const StageContext& c, const HpoSpec& spec, const Search& search);

}  // namespace strata
