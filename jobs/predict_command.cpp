// `strata predict CONFIG WEIGHTS|ENSEMBLE`: the test accuracy of a weights file, or of an ensemble
// a run made, on CONFIG's data.
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "core/trainer.hpp"
#include "core/weights_io.hpp"
#include "ensemble/member_data.hpp"
#include "ensemble/peer_combine.hpp"
#include "jobs/commands.hpp"

namespace strata {

namespace {

// An ensemble_report.json, or the directory that holds one.
std::filesystem::path ensemble_report_path(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path)) return path / "ensemble_report.json";
  return path;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw DataError(fmt::format("cannot read {}", path.string()));
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded()) throw DataError(fmt::format("{} is not valid JSON", path.string()));
  return json;
}

// Every member of the report rebuilt from its own config and weights, its predictions of the test
// set combined as the ensemble stage does (the same fixed-point sums, so the same accuracies).
int predict_ensemble(const Config& config, const std::filesystem::path& report_path, int threads) {
  const nlohmann::json report = read_json(report_path);
  if (!report.contains("members") || !report["members"].is_array())
    throw DataError(
        fmt::format("{}: no members list: not an ensemble_report.json", report_path.string()));
  // Paths in the report are relative to the ensemble stage's directory, where the report is.
  const auto stage_dir = report_path.parent_path();
  // Every member was trained on the same inputs; the first one's weights say how they were
  // standardised.
  std::optional<Normalisation> normalisation;
  for (const auto& member : report["members"])
    if (member.value("status", "") == "ok") {
      normalisation =
          read_normalisation((stage_dir / member.at("weights").get<std::string>()).string());
      break;
    }
  const TrainingData data = load_training_data(config, normalisation ? &*normalisation : nullptr);
  EnsembleSums sums(data.test.count(), data.num_classes);
  for (const auto& member : report["members"]) {
    if (member.value("status", "") != "ok") continue;
    const Config member_config =
        load_config((stage_dir / member.at("config").get<std::string>()).string());
    const nlohmann::json info = read_json(
        stage_dir / std::filesystem::path(member.at("config").get<std::string>()).parent_path() /
        "member.json");
    TrainingData own = data;
    if (info.contains("feature_subset") && !info["feature_subset"].is_null()) {
      const auto& f = info["feature_subset"];
      FeatureSubset subset;
      subset.row_begin = f.at("row_begin");
      subset.row_end = f.at("row_end");
      subset.col_begin = f.at("col_begin");
      subset.col_end = f.at("col_end");
      subset.channels = f.at("channels").get<std::vector<int>>();
      mask_features(own, subset, member_config.file);
    }
    Trainer trainer(member_config, build_model(member_config, own), own,
                    standalone_plan(member_config), threads);
    load_weights((stage_dir / member.at("weights").get<std::string>()).string(), trainer.model());
    trainer.broadcast_weights();
    sums.add(Predictions{data.num_classes, trainer.predict(own.test)},
             member.at("weight").get<double>());
  }
  const CombinedPredictions combined = sums.finish();
  fmt::print("ensemble of {} members ({}), {} test samples:\n", sums.members(),
             report_path.string(), data.test.count());
  fmt::print("  mean: test accuracy {}\n",
             accuracy(predicted_classes(combined.mean), data.test.labels));
  fmt::print("  weighted: test accuracy {}\n",
             accuracy(predicted_classes(combined.weighted), data.test.labels));
  fmt::print("  vote: test accuracy {}\n", accuracy(combined.vote, data.test.labels));
  return 0;
}

}  // namespace

int predict_command(const std::string& config_path, const std::string& weights_path, int threads) {
  const Config config = load_config(config_path);
  const int workers = resolve_threads(threads >= 0 ? threads : config.run.threads);
  const std::filesystem::path path(weights_path);
  if (std::filesystem::is_directory(path) || path.extension() == ".json")
    return predict_ensemble(config, ensemble_report_path(path), workers);
  // The inputs as the weights were trained to see them, when the file says how.
  const auto normalisation = read_normalisation(weights_path);
  const TrainingData data = load_training_data(config, normalisation ? &*normalisation : nullptr);
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), workers);
  load_weights(weights_path, trainer.model());
  trainer.broadcast_weights();
  const Evaluation test = trainer.evaluate(data.test);
  // Every digit: evaluation does not depend on threads or replicas, so these equal the run's own
  // metrics.jsonl numbers exactly.
  fmt::print("test accuracy {} loss {} ({} samples, weights {})\n", test.accuracy, test.loss,
             test.count, weights_path);
  return 0;
}

}  // namespace strata
