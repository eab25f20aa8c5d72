#include "hpo/pbt_log.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "hpo/journal_rows.hpp"

namespace strata {

namespace {

bool complete_pbt_row(const nlohmann::json& row) {
  for (auto key : {"round", "member", "trial", "fitness", "params", "epochs"})
    if (!row.contains(key)) return false;
  return row["round"].is_number_integer() && row["member"].is_number_integer() &&
         row.contains("copies") && row.contains("parent_trial");
}

std::string csv_header(const SearchSpace& space) {
  std::string header = "round,member,trial,parent_trial";
  for (const auto& p : space.params) header += ',' + csv_field(p.name);
  return header + ",epochs,fitness,val_accuracy,test_accuracy,copies\n";
}

std::string csv_row(const SearchSpace& space, const nlohmann::json& row) {
  auto text = [](const nlohmann::json& v) {
    if (v.is_number_integer()) return fmt::format("{}", v.get<long long>());
    return v.is_number() ? fmt::format("{}", v.get<double>()) : std::string();
  };
  std::string line = fmt::format("{},{},{},{}", row["round"].get<int>(), row["member"].get<int>(),
                                 row["trial"].get<int>(), text(row["parent_trial"]));
  for (const auto& p : space.params)
    line += ',' + csv_field(param_text(row["params"].value(p.name, nlohmann::json(""))));
  return line + fmt::format(",{},{},{},{},{}\n", row["epochs"].get<int>(), text(row["fitness"]),
                            text(row["val_accuracy"]), text(row["test_accuracy"]),
                            text(row["copies"]));
}

}  // namespace

PbtLog::PbtLog(const std::filesystem::path& dir, const SearchSpace& space, int members, bool resume)
    : space_(space), members_(members) {
  std::vector<nlohmann::json> rows;
  if (resume) rows = complete_rows(dir / "pbt.jsonl", complete_pbt_row);
  // Only whole rounds count: the exploits of a round are decided on all of its scores.
  rows.resize(rows.size() - rows.size() % static_cast<std::size_t>(members));
  std::string csv = csv_header(space_), jsonl;
  for (std::size_t first = 0; first < rows.size(); first += static_cast<std::size_t>(members)) {
    std::vector<double> scores;
    for (int m = 0; m < members; ++m) {
      const auto& row = rows[first + static_cast<std::size_t>(m)];
      const int round = static_cast<int>(recovered_.size()) + 1;
      if (row["round"].get<int>() != round || row["member"].get<int>() != m)
        throw DataError(fmt::format(
            "{}: expected the row of round {} member {}, found round {} member {}: the journal's "
            "rows were reordered or edited",
            (dir / "pbt.jsonl").string(), round, m, row["round"].get<int>(),
            row["member"].get<int>()));
      scores.push_back(row["fitness"].is_number() ? row["fitness"].get<double>()
                                                  : std::numeric_limits<double>::quiet_NaN());
      csv += csv_row(space_, row);
      jsonl += row.dump() + '\n';
      kept_.push_back(row);
    }
    recovered_.push_back(std::move(scores));
  }
  write_text_atomically(dir / "pbt.csv", csv);
  write_text_atomically(dir / "pbt.jsonl", jsonl);
  csv_ = open_for_rows(dir / "pbt.csv");
  jsonl_ = open_for_rows(dir / "pbt.jsonl");
}

namespace {

nlohmann::json row_of(const PbtPopulation& population, const PbtRound& round, int member,
                      const PbtMemberResult* result) {
  const auto m = static_cast<std::size_t>(member);
  const int members = population.config().population;
  nlohmann::json copies;
  for (const PbtExploit& e : round.exploits)
    if (e.target == member) copies = e.source;
  const int parent = round.parents[m];
  nlohmann::json row = {{"round", round.round},
                        {"member", member},
                        {"trial", PbtLog::segment(round.round, member, members)},
                        {"parent_trial", parent < 0 ? nlohmann::json()
                                                    : nlohmann::json(PbtLog::segment(
                                                          round.round - 1, parent, members))},
                        {"params", params_of(population.space(), round.genomes[m])},
                        {"copies", copies}};
  if (result != nullptr) {
    row["fitness"] = number_or_null(result->fitness);
    row["val_accuracy"] = number_or_null(result->val_accuracy);
    row["test_accuracy"] = number_or_null(result->test_accuracy);
    row["epochs"] = result->epochs;
  }
  return row;
}

}  // namespace

void PbtLog::check_replay(const PbtPopulation& population) const {
  for (const auto& kept : kept_) {
    const int round = kept["round"].get<int>(), member = kept["member"].get<int>();
    const auto made = row_of(population, population.history()[static_cast<std::size_t>(round - 1)],
                             member, nullptr);
    for (auto key : {"params", "copies", "parent_trial"})
      if (made[key] != kept[key])
        throw DataError(fmt::format(
            "pbt.jsonl: round {} member {} has {} {}, but replaying the journal makes it {}: the "
            "journal was written by another search (config, seed or space)",
            round, member, key, kept[key].dump(), made[key].dump()));
  }
}

void PbtLog::append(const PbtPopulation& population, const PbtRound& round,
                    std::span<const PbtMemberResult> results) {
  for (int m = 0; m < members_; ++m) {
    const auto row = row_of(population, round, m, &results[static_cast<std::size_t>(m)]);
    csv_ << csv_row(space_, row);
    jsonl_ << row.dump() << '\n';
  }
  csv_.flush();
  jsonl_.flush();
  if (!csv_ || !jsonl_) throw DataError("cannot append to pbt.csv / pbt.jsonl (disk full?)");
}

}  // namespace strata
