#include "hpo/pbt.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "hpo/search.hpp"

namespace strata {

std::vector<PbtExploit> pbt_exploits(std::span<const double> scores, double quantile,
                                     Direction direction, Rng& rng) {
  const auto members = static_cast<int>(scores.size());
  const int scored = static_cast<int>(
      std::count_if(scores.begin(), scores.end(), [](double s) { return !std::isnan(s); }));
  if (scored == 0) throw std::invalid_argument("no member has a score: every one diverged");
  const int quantile_size =
      std::min(static_cast<int>(std::ceil(quantile * members - 1e-9)), members / 2);
  const std::vector<std::size_t> order = rank_order(scores, direction);  // best first, NaN last
  const int copiers = std::max(quantile_size, members - scored);
  const int sources = std::min(quantile_size, scored);
  if (copiers == 0 || sources == 0) return {};
  std::vector<int> targets;
  for (int k = members - copiers; k < members; ++k)
    targets.push_back(static_cast<int>(order[static_cast<std::size_t>(k)]));
  std::sort(targets.begin(), targets.end());
  std::vector<PbtExploit> exploits;
  for (int target : targets) {
    const auto pick = static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(sources)));
    exploits.push_back({target, static_cast<int>(order[pick])});
  }
  return exploits;
}

Genome pbt_explore(const SearchSpace& space, const Genome& genome, double resample_probability,
                   Rng& rng) {
  Genome out = genome;
  for (std::size_t k = 0; k < space.params.size(); ++k) {
    const ParamSpec& p = space.params[k];
    // Both draws are taken for every gene, so that one gene's outcome never shifts the next's.
    const bool resample = rng.uniform_double() < resample_probability;
    const bool up = rng.uniform_double() < 0.5;
    const double fresh = sample_value(p, rng);
    if (resample) {
      out[k] = fresh;
      continue;
    }
    const double factor = up ? 1.2 : 0.8;
    switch (p.kind) {
      case ParamKind::uniform:
      case ParamKind::log_uniform:
        out[k] = clamp_value(p, genome[k] * factor);
        break;
      case ParamKind::integer: {
        double moved = std::round(genome[k] * factor);
        if (moved == genome[k]) moved += up ? 1.0 : -1.0;
        out[k] = clamp_value(p, moved);
        break;
      }
      case ParamKind::choice:
        out[k] = clamp_value(p, genome[k] + (up ? 1.0 : -1.0));
        break;
    }
  }
  return out;
}

PbtPopulation::PbtPopulation(SearchSpace space, PbtConfig config)
    : space_(std::move(space)), config_(config) {
  validate(space_);
  if (config_.population < 2)
    throw std::invalid_argument(
        fmt::format("pbt needs at least 2 members, got {}", config_.population));
  Rng rng(derive_seed(config_.seed, {seed_hpo, hpo_pbt, 0}));
  for (int m = 0; m < config_.population; ++m) genomes_.push_back(sample(space_, rng));
  parents_.assign(static_cast<std::size_t>(config_.population), -1);
}

const PbtRound& PbtPopulation::end_round(std::span<const double> scores) {
  if (static_cast<int>(scores.size()) != config_.population)
    throw std::invalid_argument(fmt::format("pbt round {}: {} scores for {} members", round(),
                                            scores.size(), config_.population));
  PbtRound ended;
  ended.round = round();
  ended.genomes = genomes_;
  ended.parents = parents_;
  ended.scores.assign(scores.begin(), scores.end());
  Rng rng(derive_seed(config_.seed, {seed_hpo, hpo_pbt, static_cast<std::uint64_t>(ended.round)}));
  if (config_.rounds == 0 || ended.round < config_.rounds)
    ended.exploits = pbt_exploits(scores, config_.quantile, config_.direction, rng);
  for (std::size_t m = 0; m < parents_.size(); ++m) parents_[m] = static_cast<int>(m);
  for (const PbtExploit& e : ended.exploits) {
    const auto target = static_cast<std::size_t>(e.target);
    genomes_[target] = pbt_explore(space_, ended.genomes[static_cast<std::size_t>(e.source)],
                                   config_.resample_probability, rng);
    parents_[target] = e.source;
  }
  history_.push_back(std::move(ended));
  return history_.back();
}

int PbtPopulation::best_member() const {
  if (history_.empty()) return -1;
  const auto order = rank_order(history_.back().scores, config_.direction);
  return static_cast<int>(order.front());
}

std::vector<std::pair<int, int>> PbtPopulation::lineage(int member) const {
  std::vector<std::pair<int, int>> path;
  int at = member;
  // Round r's values of `at` came from the state of parents[at] in round r - 1.
  for (int r = static_cast<int>(history_.size()); r >= 1; --r) {
    path.emplace_back(r, at);
    const int parent =
        history_[static_cast<std::size_t>(r - 1)].parents[static_cast<std::size_t>(at)];
    if (parent >= 0) at = parent;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void PbtPopulation::save_state(StateDict& out, const std::string& prefix) const {
  nlohmann::json rounds = nlohmann::json::array();
  for (const PbtRound& r : history_) {
    nlohmann::json scores = nlohmann::json::array();
    for (double s : r.scores)
      scores.push_back(std::isnan(s) ? nlohmann::json() : nlohmann::json(s));
    rounds.push_back(scores);
  }
  out.put_text(prefix + "/scores", rounds.dump());
  out.put_int(prefix + "/population", config_.population);
}

void PbtPopulation::load_state(const StateDict& in, const std::string& prefix) {
  if (in.get_int(prefix + "/population") != config_.population)
    throw DataError(fmt::format("the pbt state has {} members, this search {}",
                                in.get_int(prefix + "/population"), config_.population));
  const auto rounds = nlohmann::json::parse(in.get_text(prefix + "/scores"), nullptr, false);
  if (rounds.is_discarded() || !rounds.is_array())
    throw DataError(fmt::format("{}/scores is not a JSON list of rounds", prefix));
  *this = PbtPopulation(space_, config_);
  for (const auto& r : rounds) {
    std::vector<double> scores;
    for (const auto& s : r) scores.push_back(s.is_null() ? std::nan("") : s.get<double>());
    if (static_cast<int>(scores.size()) != config_.population)
      throw DataError(fmt::format("{}/scores: round {} has {} scores for {} members", prefix,
                                  round(), scores.size(), config_.population));
    end_round(scores);
  }
}

}  // namespace strata
