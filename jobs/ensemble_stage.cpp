#include "jobs/ensemble_stage.hpp"

#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/clock.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "core/hdf5_file.hpp"
#include "core/rng.hpp"
#include "ensemble/member_data.hpp"
#include "ensemble/peer_combine.hpp"
#include "jobs/group_training.hpp"
#include "jobs/predictions_file.hpp"
#include "jobs/training_queue.hpp"

namespace strata {

namespace {

struct Member {
  int index = 0;
  int base = 0;
  int variant = 0;
  std::string variation;  // "seed 1", "bootstrap sample 2", "rows 0-14, cols all, channels all"
};

int variations_of(const EnsembleSpec& spec) {
  if (!spec.feature_subsets.empty()) return static_cast<int>(spec.feature_subsets.size());
  return std::max({1, spec.seeds, spec.bagging});
}

std::vector<Member> members_of(const EnsembleSpec& spec, int bases) {
  const int variations = variations_of(spec);
  std::vector<Member> members;
  for (int b = 0; b < bases; ++b)
    for (int v = 0; v < variations; ++v) {
      Member m{b * variations + v, b, v, ""};
      m.variation = !spec.feature_subsets.empty()
                        ? describe(spec.feature_subsets[static_cast<std::size_t>(v)])
                    : spec.bagging > 0 ? fmt::format("bootstrap sample {}", v)
                                       : fmt::format("seed {}", v);
      members.push_back(m);
    }
  return members;
}

std::filesystem::path members_dir(const StageContext& c) {
  return std::filesystem::path(c.config.output.dir) / "ensemble";
}

std::filesystem::path member_dir(const StageContext& c, int member) {
  return members_dir(c) / std::to_string(member);
}

std::uint64_t member_seed(const StageContext& c, const Member& m) {
  return derive_seed(c.config.run.seed, {seed_ensemble, static_cast<std::uint64_t>(c.stage_index),
                                         static_cast<std::uint64_t>(m.index)});
}

// The member's training: its base config on the stage's layout, with its own seed and the stage's
// epochs.
Config member_config(const StageContext& c, const EnsembleSpec& spec,
                     const std::vector<EnsembleBase>& bases, const Member& m) {
  Config config = bases[static_cast<std::size_t>(m.base)].config;
  config.parallel = c.config.parallel;
  config.checkpoint = c.config.checkpoint;
  config.output = c.config.output;
  config.output.dir = member_dir(c, m.index).string();
  if (spec.epochs > 0) config.training.epochs = spec.epochs;
  config.run.seed = member_seed(c, m);
  return config;
}

// The data member `m` trains and is judged on: the stage's, resampled or masked for its
// variation (held in `own`), or the stage's as it is.
const TrainingData& member_data(const StageContext& c, const EnsembleSpec& spec, const Member& m,
                                const TrainingData& shared, std::optional<TrainingData>& own) {
  if (spec.bagging > 0) {
    own.emplace(bootstrap_sample(
        shared,
        derive_seed(c.config.run.seed, {seed_bagging, static_cast<std::uint64_t>(c.stage_index),
                                        static_cast<std::uint64_t>(m.index)})));
    return *own;
  }
  if (!spec.feature_subsets.empty()) {
    own.emplace(shared);
    mask_features(*own, spec.feature_subsets[static_cast<std::size_t>(m.variant)], c.config.file);
    return *own;
  }
  return shared;
}

nlohmann::json member_json(const StageContext& c, const EnsembleSpec& spec,
                           const std::vector<EnsembleBase>& bases, const Member& m) {
  const auto dir = std::filesystem::relative(member_dir(c, m.index), c.config.output.dir);
  nlohmann::json subset = nullptr;
  if (!spec.feature_subsets.empty()) {
    const FeatureSubset& f = spec.feature_subsets[static_cast<std::size_t>(m.variant)];
    subset = {{"row_begin", f.row_begin},
              {"row_end", f.row_end},
              {"col_begin", f.col_begin},
              {"col_end", f.col_end},
              {"channels", f.channels}};
  }
  return {{"member", m.index},
          {"feature_subset", subset},
          {"source", bases[static_cast<std::size_t>(m.base)].source},
          {"variation", m.variation},
          {"seed", member_seed(c, m)},
          {"config", (dir / "config.yaml").string()},
          {"weights", (dir / "weights.h5").string()},
          {"predictions", (dir / "predictions.h5").string()}};
}

// Member `m` as a training job: its weights, then its predictions of the validation and test
// sets, in its own directory.
TrainingJob member_job(const StageContext& c, const EnsembleSpec& spec,
                       const std::vector<EnsembleBase>& bases, const TrainingData& shared,
                       std::optional<TrainingData>& own, const Member& m) {
  TrainingJob job;
  job.config = member_config(c, spec, bases, m);
  job.data = &member_data(c, spec, m, shared, own);
  job.checkpoints = std::filesystem::path(c.config.output.dir) / "checkpoints" /
                    fmt::format("stage{}", c.stage_index) / fmt::format("member{}", m.index);
  job.label = fmt::format("member {}: ", m.index);
  job.meta.put_text("kind", "ensemble member");
  job.meta.put_int("stage", c.stage_index);
  job.meta.put_int("member", m.index);
  job.finish = [&c, &spec, &bases, m, data = job.data](Trainer& trainer) {
    SetPredictions p{trainer.predict(data->validation), trainer.predict(data->test),
                     data->num_classes};
    if (c.topology.member().rank() != 0) return;
    const auto dir = member_dir(c, m.index);
    write_predictions(dir / "predictions.h5", p);
    write_text_atomically(dir / "config.yaml",
                          trained_config_text(member_config(c, spec, bases, m)));
    write_text_atomically(dir / "member.json", member_json(c, spec, bases, m).dump(2) + "\n");
  };
  return job;
}

Predictions as_predictions(std::vector<float> probabilities, int classes) {
  return Predictions{classes, std::move(probabilities)};
}

// The report's numbers for every combiner, computed on every rank: each group reads the
// predictions of the members it holds (member m on group m mod G), and two allreduces over the
// peers give every member's accuracies and the combined predictions.
nlohmann::json combine_members(const StageContext& c, const EnsembleSpec& spec,
                               const std::vector<EnsembleBase>& bases,
                               const std::vector<Member>& members, const std::vector<bool>& done,
                               const TrainingData& shared) {
  const Topology& topology = c.topology;
  const int groups = topology.plan().groups, group = topology.coords().group;
  const int n = static_cast<int>(members.size());
  const auto& val_labels = shared.validation.labels;
  const auto& test_labels = shared.test.labels;
  std::map<int, SetPredictions> held;
  // Member m's validation accuracy at 2m and its test accuracy at 2m + 1: one sum for both.
  std::vector<double> accuracies(2 * static_cast<std::size_t>(n), 0.0);
  const auto val_accuracy = [&](int m) -> double& {
    return accuracies[2 * static_cast<std::size_t>(m)];
  };
  const auto test_accuracy = [&](int m) -> double& {
    return accuracies[2 * static_cast<std::size_t>(m) + 1];
  };
  for (int m = group; m < n; m += groups) {
    if (!done[static_cast<std::size_t>(m)]) continue;
    SetPredictions p = read_predictions((member_dir(c, m) / "predictions.h5").string());
    val_accuracy(m) =
        accuracy(predicted_classes(as_predictions(p.validation, p.classes)), val_labels);
    test_accuracy(m) = accuracy(predicted_classes(as_predictions(p.test, p.classes)), test_labels);
    held.emplace(m, std::move(p));
  }
  topology.peers().allreduce_sum(std::span<double>(accuracies));
  std::vector<double> val_accuracies;
  for (int m = 0; m < n; ++m)
    if (done[static_cast<std::size_t>(m)]) val_accuracies.push_back(val_accuracy(m));
  // Members that all score 0 on validation (or no validation set) weigh alike.
  const bool any_accuracy =
      std::any_of(val_accuracies.begin(), val_accuracies.end(), [](double a) { return a > 0.0; });
  const std::vector<double> shares =
      any_accuracy ? accuracy_weights(val_accuracies)
                   : std::vector<double>(val_accuracies.size(), 1.0 / val_accuracies.size());
  std::vector<double> weight_of(static_cast<std::size_t>(n), 0.0);
  for (int m = 0, k = 0; m < n; ++m)
    if (done[static_cast<std::size_t>(m)])
      weight_of[static_cast<std::size_t>(m)] = shares[static_cast<std::size_t>(k++)];
  const int classes = shared.num_classes;
  EnsembleSums val_sums(shared.validation.count(), classes),
      test_sums(shared.test.count(), classes);
  for (const auto& [m, p] : held) {
    val_sums.add(as_predictions(p.validation, classes), weight_of[static_cast<std::size_t>(m)]);
    test_sums.add(as_predictions(p.test, classes), weight_of[static_cast<std::size_t>(m)]);
  }
  val_sums.sum_over(topology.peers());
  test_sums.sum_over(topology.peers());
  const CombinedPredictions val = val_sums.finish(), test = test_sums.finish();

  nlohmann::json report;
  report["members"] = nlohmann::json::array();
  int best_val = -1, best_test = -1;
  for (int m = 0; m < n; ++m) {
    const Member& member = members[static_cast<std::size_t>(m)];
    nlohmann::json row = member_json(c, spec, bases, member);
    const bool ok = done[static_cast<std::size_t>(m)];
    row["status"] = ok ? "ok" : "failed";
    row["val_accuracy"] = ok ? nlohmann::json(val_accuracy(m)) : nullptr;
    row["test_accuracy"] = ok ? nlohmann::json(test_accuracy(m)) : nullptr;
    row["weight"] = weight_of[static_cast<std::size_t>(m)];
    report["members"].push_back(row);
    if (!ok) continue;
    if (best_val < 0 || val_accuracy(m) > val_accuracy(best_val)) best_val = m;
    if (best_test < 0 || test_accuracy(m) > test_accuracy(best_test)) best_test = m;
  }
  const double best_test_accuracy = test_accuracy(best_test);
  report["best_member"] = {{"member", best_test},
                           {"test_accuracy", best_test_accuracy},
                           {"val_accuracy", val_accuracy(best_test)}};
  report["selected_member"] = {{"member", best_val},
                               {"val_accuracy", val_accuracy(best_val)},
                               {"test_accuracy", test_accuracy(best_val)}};
  report["combiners"] = nlohmann::json::object();
  for (const CombinerKind kind : spec.combiners) {
    const auto score = [&](const CombinedPredictions& p, const std::vector<std::int32_t>& labels) {
      return kind == CombinerKind::vote       ? accuracy(p.vote, labels)
             : kind == CombinerKind::weighted ? accuracy(predicted_classes(p.weighted), labels)
                                              : accuracy(predicted_classes(p.mean), labels);
    };
    const double test_accuracy = score(test, test_labels);
    report["combiners"][to_string(kind)] = {
        {"val_accuracy", score(val, val_labels)},
        {"test_accuracy", test_accuracy},
        {"gain_over_best_member_points", 100.0 * (test_accuracy - best_test_accuracy)}};
  }
  report["members_combined"] = val_sums.members();
  report["test_samples"] = shared.test.count();
  return report;
}

}  // namespace

nlohmann::json ensemble_stage(const StageContext& c, const EnsembleSpec& spec,
                              const std::vector<EnsembleBase>& bases) {
  const Topology& topology = c.topology;
  const bool coordinator = topology.world_rank() == 0;
  const std::vector<Member> members = members_of(spec, static_cast<int>(bases.size()));
  const int n = static_cast<int>(members.size());
  // Members that change the data get their own copy of it; the rest share this one.
  const TrainingData shared = load_training_data(c.config);
  if (coordinator) {
    fmt::print("[ensemble] {} members ({} config(s) x {}) on {} member groups, training {}\n", n,
               bases.size(), variations_of(spec), topology.plan().groups,
               trainings_device(c.config));
    std::fflush(stdout);
  }
  const std::vector<bool> done = run_training_queue(
      c, "ensemble", members_dir(c), n,
      [&](int id, const std::function<void()>& serve) {
        std::optional<TrainingData> own;
        const Member& m = members[static_cast<std::size_t>(id)];
        return train_job(
            c, id, [&] { return member_job(c, spec, bases, shared, own, m); }, serve);
      },
      [&](int id) {
        const Member& m = members[static_cast<std::size_t>(id)];
        return fmt::format("member {} ({}, {})", m.index,
                           bases[static_cast<std::size_t>(m.base)].source, m.variation);
      });
  if (std::count(done.begin(), done.end(), true) == 0)
    throw DataError(fmt::format("ensemble: every one of its {} members failed (see {}/trials.csv)",
                                n, members_dir(c).string()));
  const nlohmann::json report = combine_members(c, spec, bases, members, done, shared);
  if (!coordinator) return {};
  write_text_atomically(std::filesystem::path(c.config.output.dir) / "ensemble_report.json",
                        report.dump(2) + "\n");
  for (const auto& [name, result] : report["combiners"].items())
    fmt::print("[ensemble] {}: test acc {:.4f} ({:+.2f} points over the best member's {:.4f})\n",
               name, result["test_accuracy"].get<double>(),
               result["gain_over_best_member_points"].get<double>(),
               report["best_member"]["test_accuracy"].get<double>());
  fmt::print("[ensemble] report: {}/ensemble_report.json\n", c.config.output.dir);
  nlohmann::json artifact;
  artifact["report"] = "ensemble_report.json";
  artifact["members"] = nlohmann::json::array();
  for (const auto& row : report["members"])
    if (row["status"] == "ok") artifact["members"].push_back(row);
  return artifact;
}

}  // namespace strata
