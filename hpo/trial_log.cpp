#include "hpo/trial_log.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "hpo/journal_rows.hpp"

namespace strata {

namespace {

nlohmann::json curve_json(const std::vector<double>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const double v : curve) out.push_back(number_or_null(v));
  return out;
}

}  // namespace

const char* to_string(TrialStatus status) {
  switch (status) {
    case TrialStatus::ok:
      return "ok";
    case TrialStatus::failed:
      return "failed";
    case TrialStatus::timeout:
      return "timeout";
    case TrialStatus::cached:
      return "cached";
    case TrialStatus::pruned:
      return "pruned";
  }
  return "unknown";
}

namespace {

std::string csv_header(const SearchSpace& space) {
  std::string header = "trial,generation,deme,member_group";
  for (const auto& p : space.params) header += ',' + csv_field(p.name);
  return header +
         ",global_batch,epochs,fitness,val_accuracy,test_accuracy,seconds,ended_s,status,reason\n";
}

// A CSV row from the JSON row, so that the two files always say the same.
std::string csv_row(const SearchSpace& space, const nlohmann::json& row) {
  auto number = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{}", v.get<double>()) : std::string();
  };
  std::string line =
      fmt::format("{},{},{},{}", row["trial"].get<int>(), row["generation"].get<int>(),
                  row["deme"].get<int>(), row["member_group"].get<int>());
  for (const auto& p : space.params)
    line += ',' + csv_field(param_text(row["params"].value(p.name, nlohmann::json(""))));
  line += ',' + (row["global_batch"].is_number() ? fmt::format("{}", row["global_batch"].get<int>())
                                                 : std::string());
  line += fmt::format(",{}", row.value("epochs", 0));
  line += fmt::format(
      ",{},{},{},{:.3f},{:.3f},{},{}\n", number(row["fitness"]), number(row["val_accuracy"]),
      number(row["test_accuracy"]), row["seconds"].get<double>(), row["ended_s"].get<double>(),
      row["status"].get<std::string>(), csv_field(row["reason"].get<std::string>()));
  return line;
}

bool complete_trial_row(const nlohmann::json& row) {
  return row.contains("trial") && row["trial"].is_number_integer() && row.contains("status") &&
         row["status"].is_string() && row.contains("ended_s") && row["ended_s"].is_number() &&
         row.contains("params") && row.contains("fitness") && row.contains("generation") &&
         row.contains("deme") && row.contains("member_group") && row.contains("seconds") &&
         row.contains("reason");
}

}  // namespace

TrialLog::TrialLog(const std::filesystem::path& dir, const SearchSpace& space, bool resume)
    : space_(space) {
  std::vector<nlohmann::json> rows;
  if (resume) rows = complete_rows(dir / "trials.jsonl", complete_trial_row);
  std::string csv = csv_header(space_), jsonl;
  double last_ended = 0.0;
  for (const auto& row : rows) {
    csv += csv_row(space_, row);
    jsonl += row.dump() + '\n';
    last_ended = std::max(last_ended, row["ended_s"].get<double>());
    logged_.insert(row["trial"].get<int>());
    kept_params_[row["trial"].get<int>()] = row["params"].dump();
    // A cached row is no result of its own: replaying its original makes it again.
    if (row["status"] == "cached") continue;
    pruned_rows_ += row["status"] == "pruned" ? 1 : 0;
    const bool ok =
        (row["status"] == "ok" || row["status"] == "pruned") && row["fitness"].is_number();
    recovered_.push_back(
        {row["trial"].get<int>(),
         ok ? row["fitness"].get<double>() : std::numeric_limits<double>::quiet_NaN(),
         row.value("epochs", 0)});
    if (row.contains("curve") && row["curve"].is_array()) {
      std::vector<double> curve;
      for (const auto& v : row["curve"])
        curve.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
      curves_[row["trial"].get<int>()] = std::move(curve);
    }
  }
  write_text_atomically(dir / "trials.csv", csv);
  write_text_atomically(dir / "trials.jsonl", jsonl);
  csv_ = open_for_rows(dir / "trials.csv");
  jsonl_ = open_for_rows(dir / "trials.jsonl");
  opened_ -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(last_ended));
}

void TrialLog::check_replay(const Search& search) const {
  for (const auto& [id, logged] : kept_params_) {
    const auto made = id < static_cast<int>(search.trials().size())
                          ? params_of(space_, search.trials()[static_cast<std::size_t>(id)].genome)
                          : nlohmann::json();
    if (made.dump() != logged)
      throw DataError(fmt::format(
          "trials.jsonl: trial {} was run with {}, but replaying the journal makes it {}: the "
          "journal was written by another search (config, seed or space), or its rows were "
          "reordered",
          id, logged, made.is_null() ? std::string("no such trial") : made.dump()));
  }
}

TrialOutcome TrialLog::cached_outcome(const Trial& copy, const Trial& original) {
  TrialOutcome o;
  o.status = TrialStatus::cached;
  o.fitness = copy.fitness;
  o.val_accuracy = o.test_accuracy = std::numeric_limits<double>::quiet_NaN();
  o.member_group = -1;
  o.reason =
      fmt::format("repeats trial {}{}", original.id, original.failed ? ", which failed" : "");
  return o;
}

void TrialLog::append(const Trial& trial, const TrialOutcome& outcome) {
  const bool ok = outcome.status == TrialStatus::ok || outcome.status == TrialStatus::pruned ||
                  (outcome.status == TrialStatus::cached && !trial.failed);
  const double ended =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count();
  const nlohmann::json params = params_of(space_, trial.genome);
  const nlohmann::json row = {
      {"trial", trial.id},
      // Generations count from 1, on screen and in files; trials are numbered from 0.
      {"generation", trial.generation + 1},
      {"deme", trial.deme},
      {"member_group", outcome.member_group},
      {"params", params},
      {"global_batch",
       outcome.global_batch > 0 ? nlohmann::json(outcome.global_batch) : nlohmann::json()},
      {"fitness", ok ? number_or_null(outcome.fitness) : nlohmann::json()},
      {"val_accuracy", ok ? number_or_null(outcome.val_accuracy) : nlohmann::json()},
      {"test_accuracy", ok ? number_or_null(outcome.test_accuracy) : nlohmann::json()},
      {"epochs", outcome.epochs},
      {"curve", curve_json(outcome.curve)},
      {"seconds", outcome.seconds},
      {"ended_s", ended},
      {"status", to_string(outcome.status)},
      {"reason", outcome.reason}};
  logged_.insert(trial.id);
  csv_ << csv_row(space_, row);
  csv_.flush();
  jsonl_ << row.dump() << '\n';
  jsonl_.flush();
  if (!csv_ || !jsonl_) throw DataError("cannot append to trials.csv / trials.jsonl (disk full?)");
}

void write_hpo_summary(const std::filesystem::path& path, const Search& search, double wall_seconds,
                       const SearchResults* results) {
  nlohmann::json summary;
  summary["trainings"] = search.trainings();
  summary["cached"] = search.cached();
  summary["epochs"] = search.epochs();
  summary["wall_seconds"] = wall_seconds;
  summary["stop_reason"] = search.stop_reason();
  summary["direction"] = search.direction() == Direction::maximize ? "maximize" : "minimize";
  const auto target = search.trainings_to_target();
  summary["trainings_to_target"] = target ? nlohmann::json(*target) : nlohmann::json();
  if (const auto best = search.best()) {
    summary["best"] = {{"trial", best->id},
                       {"generation", best->generation + 1},
                       {"fitness", best->fitness},
                       {"params", params_of(search.space(), best->genome)}};
  } else {
    summary["best"] = nullptr;
  }
  if (results != nullptr && search.best()) {
    summary["best"]["config"] = results->best_config;
    summary["best"]["weights"] = results->best_weights;
    summary["top"] = nlohmann::json::array();
    for (const Trial& t : search.top(results->keep_top))
      summary["top"].push_back({{"trial", t.id},
                                {"fitness", t.fitness},
                                {"params", params_of(search.space(), t.genome)},
                                {"config", fmt::format("trials/{}/config.yaml", t.id)},
                                {"weights", fmt::format("trials/{}/weights.h5", t.id)}});
  }
  summary["generations"] = nlohmann::json::array();
  for (const auto& g : search.history())
    summary["generations"].push_back({{"generation", g.generation + 1},
                                      {"evaluated", g.evaluated},
                                      {"failed", g.failed},
                                      {"best", number_or_null(g.best)},
                                      {"mean", number_or_null(g.mean)},
                                      {"best_so_far", number_or_null(g.best_so_far)},
                                      {"trainings", g.trainings}});
  write_text_atomically(path, summary.dump(2) + '\n');
}

}  // namespace strata
