// Population-based training's record on disk: pbt.jsonl (the journal a resumed run replays) and
// pbt.csv, a row per member per round with the values it trained with, where its state came from,
// and whom it copies next.
#pragma once

#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpo/pbt.hpp"

namespace strata {

// What a member reached at the end of a round.
struct PbtMemberResult {
  double fitness = 0.0;  // NaN: it diverged
  double val_accuracy = 0.0;
  double test_accuracy = 0.0;
  int epochs = 0;  // epochs trained by the round's end
};

class PbtLog {
 public:
  // The id of a member's segment of one round in the journal: (round - 1) x members + member.
  static int segment(int round, int member, int members) { return (round - 1) * members + member; }

  // Creates (truncates) pbt.csv and pbt.jsonl in `dir`. With `resume`, the rounds an earlier
  // attempt logged completely are kept (a round cut short by a kill is dropped, and so is a line).
  PbtLog(const std::filesystem::path& dir, const SearchSpace& space, int members, bool resume);

  // The scores of every kept round, in order (NaN: diverged), for PbtPopulation::end_round.
  const std::vector<std::vector<double>>& recovered() const { return recovered_; }
  // After the population replayed recovered(): throws DataError naming the first kept row whose
  // values or exploit differ from the replay's, which means the journal is another search's.
  void check_replay(const PbtPopulation& population) const;

  // Appends the round's rows (one per member) and flushes them.
  void append(const PbtPopulation& population, const PbtRound& round,
              std::span<const PbtMemberResult> results);

 private:
  const SearchSpace& space_;
  int members_;
  std::vector<std::vector<double>> recovered_;
  std::vector<nlohmann::json> kept_;
  std::ofstream csv_, jsonl_;
};

}  // namespace strata
