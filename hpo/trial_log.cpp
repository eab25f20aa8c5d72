#include "hpo/trial_log.hpp"

#include <cmath>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"

namespace strata {

namespace {

std::ofstream open_for_rows(const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (!out) throw DataError(fmt::format("cannot write {}", path.string()));
  return out;
}

// CSV fields hold parameter values and failure reasons; quote them when they could break a row.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// JSON has no NaN: a failed trial's numbers are null.
nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
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
  }
  return "unknown";
}

TrialLog::TrialLog(const std::filesystem::path& dir, const SearchSpace& space)
    : space_(space),
      csv_(open_for_rows(dir / "trials.csv")),
      jsonl_(open_for_rows(dir / "trials.jsonl")) {
  csv_ << "trial,generation,deme,member_group";
  for (const auto& p : space_.params) csv_ << ',' << csv_field(p.name);
  csv_ << ",global_batch,fitness,val_accuracy,test_accuracy,seconds,ended_s,status,reason\n";
  csv_.flush();
}

void TrialLog::append(const Trial& trial, const TrialOutcome& outcome) {
  const bool ok = outcome.status == TrialStatus::ok;
  const double ended =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count();
  csv_ << fmt::format("{},{},{},{}", trial.id, trial.generation, trial.deme, outcome.member_group);
  nlohmann::json params = nlohmann::json::object();
  for (std::size_t k = 0; k < space_.params.size(); ++k) {
    const std::string value = describe_value(space_.params[k], trial.genome[k]);
    csv_ << ',' << csv_field(value);
    params[space_.params[k].name] = value;
  }
  auto csv_number = [&](double v) {
    return ok && std::isfinite(v) ? fmt::format("{}", v) : std::string();
  };
  csv_ << ',' << (outcome.global_batch > 0 ? fmt::format("{}", outcome.global_batch) : "") << ','
       << csv_number(outcome.fitness) << ',' << csv_number(outcome.val_accuracy) << ','
       << csv_number(outcome.test_accuracy) << ',' << fmt::format("{:.3f}", outcome.seconds) << ','
       << fmt::format("{:.3f}", ended) << ',' << to_string(outcome.status) << ','
       << csv_field(outcome.reason) << '\n';
  csv_.flush();
  const nlohmann::json row = {
      {"trial", trial.id},
      {"generation", trial.generation},
      {"deme", trial.deme},
      {"member_group", outcome.member_group},
      {"params", params},
      {"global_batch",
       outcome.global_batch > 0 ? nlohmann::json(outcome.global_batch) : nlohmann::json()},
      {"fitness", ok ? number_or_null(outcome.fitness) : nlohmann::json()},
      {"val_accuracy", ok ? number_or_null(outcome.val_accuracy) : nlohmann::json()},
      {"test_accuracy", ok ? number_or_null(outcome.test_accuracy) : nlohmann::json()},
      {"seconds", outcome.seconds},
      {"ended_s", ended},
      {"status", to_string(outcome.status)},
      {"reason", outcome.reason}};
  jsonl_ << row.dump() << '\n';
  jsonl_.flush();
  if (!csv_ || !jsonl_) throw DataError("cannot append to trials.csv / trials.jsonl (disk full?)");
}

void write_hpo_summary(const std::filesystem::path& path, const Search& search,
                       double wall_seconds) {
  nlohmann::json summary;
  summary["trainings"] = search.trainings();
  summary["wall_seconds"] = wall_seconds;
  summary["stop_reason"] = search.stop_reason();
  summary["direction"] = search.direction() == Direction::maximize ? "maximize" : "minimize";
  const auto target = search.trainings_to_target();
  summary["trainings_to_target"] = target ? nlohmann::json(*target) : nlohmann::json();
  if (const auto best = search.best()) {
    nlohmann::json params = nlohmann::json::object();
    for (std::size_t k = 0; k < search.space().params.size(); ++k)
      params[search.space().params[k].name] =
          describe_value(search.space().params[k], best->genome[k]);
    summary["best"] = {{"trial", best->id},
                       {"generation", best->generation},
                       {"fitness", best->fitness},
                       {"params", params}};
  } else {
    summary["best"] = nullptr;
  }
  summary["generations"] = nlohmann::json::array();
  for (const auto& g : search.history())
    summary["generations"].push_back({{"generation", g.generation},
                                      {"evaluated", g.evaluated},
                                      {"failed", g.failed},
                                      {"best", number_or_null(g.best)},
                                      {"mean", number_or_null(g.mean)},
                                      {"best_so_far", number_or_null(g.best_so_far)},
                                      {"trainings", g.trainings}});
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  out << summary.dump(2) << '\n';
  if (!out) throw DataError(fmt::format("cannot write {}", path.string()));
}

}  // namespace strata
