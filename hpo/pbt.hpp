// Population-based training's decisions (after Ray Tune's PBT and LBANN's LTFB): which members
// copy which at the end of a round and how a copy's values change, as pure functions of their
// inputs and an Rng, and the population's record of its rounds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/state.hpp"
#include "hpo/genetic_operators.hpp"
#include "hpo/search_space.hpp"

namespace strata {

// After a round, member `target` continues from member `source`'s training state.
struct PbtExploit {
  int target = 0;
  int source = 0;
  bool operator==(const PbtExploit&) const = default;
};

// The ceil(quantile x members) worst members (at most half of them) each copy one of as many best,
// drawn uniformly; a member without a score (NaN: it diverged) is worse than any and always
// copies, even beyond the quantile. Targets come in member order. Throws std::invalid_argument
// when no member has a score.
std::vector<PbtExploit> pbt_exploits(std::span<const double> scores, double quantile,
                                     Direction direction, Rng& rng);

// A copy's values (Ray Tune's explore): each gene is drawn afresh from its prior with
// `resample_probability`; otherwise a real or an integer is multiplied by 0.8 or 1.2 (an integer
// then moves at least one step), and a choice moves to a neighbouring one; all within bounds.
Genome pbt_explore(const SearchSpace& space, const Genome& genome, double resample_probability,
                   Rng& rng);

struct PbtConfig {
  int population = 8;
  double quantile = 0.25;
  double resample_probability = 0.25;
  Direction direction = Direction::maximize;
  std::uint64_t seed = 0;
  int rounds = 0;  // the last round ends the training: no exploits after it; 0 = no last round
};

// One round as it ended: what each member trained with and reached, and who copied whom.
struct PbtRound {
  int round = 1;                     // 1-based
  std::vector<Genome> genomes;       // each member's values during the round
  std::vector<int> parents;          // the member whose state each started from; -1 in round 1
  std::vector<double> scores;        // each member's fitness at the round's end; NaN: diverged
  std::vector<PbtExploit> exploits;  // decided at its end
};

// The members' values round by round. Every decision depends only on the seed, the round and
// the scores, so every rank decides alike, and a replay of the scores rebuilds the population.
class PbtPopulation {
 public:
  // Draws round 1's values.
  PbtPopulation(SearchSpace space, PbtConfig config);

  const SearchSpace& space() const { return space_; }
  const PbtConfig& config() const { return config_; }
  int round() const { return static_cast<int>(history_.size()) + 1; }  // the round in progress
  const std::vector<Genome>& genomes() const { return genomes_; }      // of the round in progress
  const std::vector<int>& parents() const { return parents_; }
  const std::vector<PbtRound>& history() const { return history_; }

  // Ends the round in progress with each member's score (one per member): decides the exploits,
  // explores the copies' values, and starts the next round (after the last, none). Returns the
  // round that ended.
  const PbtRound& end_round(std::span<const double> scores);
  // The member with the best score in the last ended round; -1 before any.
  int best_member() const;
  // The values member `member` trained with in each round so far, through every state it
  // inherited: its lineage, oldest first, as (round, member) pairs.
  std::vector<std::pair<int, int>> lineage(int member) const;

  // The scores of every ended round; load_state replays them.
  void save_state(StateDict& out, const std::string& prefix) const;
  // Throws DataError when the state is another population's (its size differs).
  void load_state(const StateDict& in, const std::string& prefix);

 private:
  SearchSpace space_;
  PbtConfig config_;
  std::vector<Genome> genomes_;
  std::vector<int> parents_;
  std::vector<PbtRound> history_;
};

}  // namespace strata
