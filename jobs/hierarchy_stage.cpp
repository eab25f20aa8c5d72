#include "jobs/hierarchy_stage.hpp"

#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "core/pretrained.hpp"
#include "core/rng.hpp"
#include "jobs/predictions_file.hpp"
#include "jobs/training_queue.hpp"
#include "transfer/hierarchy.hpp"

namespace strata {

namespace {

namespace fs = std::filesystem;

constexpr int coarse_job = 0, flat_job = 1;

fs::path phase_dir(const StageContext& c, const char* phase) {
  return fs::path(c.config.output.dir) / "hierarchy" / phase;
}

// The name of the last layer with parameters: the head every model here sizes for its labels.
std::string head_of(const std::vector<LayerSpec>& layers) {
  for (auto it = layers.rbegin(); it != layers.rend(); ++it)
    if (it->kind == LayerKind::dense) return it->name;
  return {};
}

// `base` as the stage trains it, its head sized for `classes` labels, in `dir`, with its own seed.
Config model_config(const StageContext& c, const TransferSpec& spec, const Config& base,
                    int classes, const fs::path& dir, std::uint64_t which) {
  return fine_tuning_config(
      c, spec, base, classes, dir,
      derive_seed(c.config.run.seed,
                  {seed_transfer, static_cast<std::uint64_t>(c.stage_index), which}));
}

TrainingData with_super_labels(const TrainingData& data, const std::vector<int>& super_of,
                               int super_classes) {
  TrainingData out = data;
  for (SampleSet* set : {&out.train, &out.validation, &out.test})
    for (auto& label : set->labels) label = super_of[static_cast<std::size_t>(label)];
  out.num_classes = super_classes;
  return out;
}

double accuracy_of(const std::vector<float>& probabilities, int classes,
                   const std::vector<std::int32_t>& labels) {
  return accuracy(predicted_classes(Predictions{classes, probabilities}), labels);
}

}  // namespace

nlohmann::json hierarchy_stage(const StageContext& c, const TransferSpec& spec,
                               const std::optional<PretrainedSource>& source) {
  const bool coordinator = c.topology.world_rank() == 0;
  Hierarchy hierarchy;
  for (const auto& s : spec.hierarchy) {
    hierarchy.names.push_back(s.name);
    hierarchy.classes.push_back(s.classes);
  }
  const Config base = source ? source->config : c.config;
  check_layer_names(c.config.file, stage_key(c.stage_index, StageKind::transfer), spec, base);
  // Sub-classifiers are selected and coarse labels remapped in memory: check_transfer refused
  // data.read: shards before the run started.
  const std::string head = head_of(base.layers);
  if (head.empty())
    throw ConfigError(
        fmt::format("{}: transfer.hierarchical: the model has no dense layer to "
                    "size for each label set",
                    c.config.file));
  std::optional<PretrainedWeights> pretrained;
  if (source) pretrained.emplace(read_pretrained(source->weights));
  const auto* normalisation =
      pretrained && pretrained->normalisation ? &*pretrained->normalisation : nullptr;
  const TrainingData full = load_training_data(c.config, normalisation);
  std::vector<int> super_of;
  try {
    super_of = hierarchy.super_of(full.num_classes);
  } catch (const std::invalid_argument& e) {
    const SourceMark at = spec.hierarchy.front().mark;
    throw ConfigError(fmt::format("{}:{}:{}: transfer.hierarchical: {}", c.config.file, at.line,
                                  at.column, e.what()));
  }
  const int supers = hierarchy.super_classes();
  const TrainingData coarse_data = with_super_labels(full, super_of, supers);

  // Sizes: the flat model has as many parameters as the coarse one and the sub-classifiers
  // together.
  std::vector<int> subs;  // super-classes that need a sub-classifier
  for (int s = 0; s < supers; ++s)
    if (hierarchy.classes[static_cast<std::size_t>(s)].size() > 1) subs.push_back(s);
  auto sized = [&](int classes) {
    Config sized_config = model_config(c, spec, base, classes, "", 0);
    return sized_config.layers;
  };
  std::int64_t hierarchical_parameters = parameter_count(sized(supers), full.sample_shape, supers);
  for (int s : subs) {
    const int k = static_cast<int>(hierarchy.classes[static_cast<std::size_t>(s)].size());
    hierarchical_parameters += parameter_count(sized(k), full.sample_shape, k);
  }
  Config flat = model_config(c, spec, base, full.num_classes, phase_dir(c, "first") / "1", 1);
  flat.layers = widen_to(sized(full.num_classes), full.sample_shape, full.num_classes,
                         hierarchical_parameters);
  flat.training.freeze.clear();
  flat.training.lr_groups.clear();
  const std::int64_t flat_parameters =
      parameter_count(flat.layers, full.sample_shape, full.num_classes);
  if (coordinator) {
    fmt::print(
        "[hierarchy] {} super-classes, {} sub-classifiers, {} parameters in all; a flat "
        "model of {} parameters to compare; coarse from {}\n",
        supers, subs.size(), hierarchical_parameters, flat_parameters,
        source ? source->description : "scratch");
    std::fflush(stdout);
  }
  // Every model predicts the full validation and test sets, for routing.
  const auto write_full_predictions = [&](const fs::path& dir) {
    return [&c, &full, dir](Trainer& trainer) {
      SetPredictions p{trainer.predict(full.validation), trainer.predict(full.test),
                       trainer.model().num_classes()};
      if (c.topology.member().rank() == 0) write_predictions(dir / "predictions.h5", p);
    };
  };
  const auto checkpoints = [&](const std::string& name) {
    return fs::path(c.config.output.dir) / "checkpoints" / fmt::format("stage{}", c.stage_index) /
           name;
  };

  // First the coarse classifier and the flat model.
  const std::vector<bool> first = run_training_queue(
      c, "hierarchy", phase_dir(c, "first"), 2,
      [&](int job, const std::function<void()>& serve) {
        return train_job(
            c, job,
            [&] {
              TrainingJob t;
              if (job == coarse_job) {
                t.config = model_config(c, spec, base, supers, phase_dir(c, "first") / "0", 0);
                if (!pretrained) {
                  // Nothing to keep: a coarse classifier from scratch learns everywhere.
                  t.config.training.freeze.clear();
                  t.config.training.lr_groups.clear();
                }
                t.data = &coarse_data;
                if (pretrained)
                  t.prepare = [&](Trainer& trainer) {
                    load_pretrained(*pretrained, trainer.model(), {head});
                    trainer.broadcast_weights();
                  };
              } else {
                t.config = flat;
                t.data = &full;
              }
              t.checkpoints = checkpoints(job == coarse_job ? "coarse" : "flat");
              t.label = job == coarse_job ? "coarse: " : "flat: ";
              t.meta.put_text("kind", job == coarse_job ? "coarse classifier" : "flat baseline");
              t.finish = write_full_predictions(t.config.output.dir);
              return t;
            },
            serve);
      },
      [](int job) { return job == coarse_job ? "coarse classifier" : "flat model"; });
  if (!first[coarse_job] || !first[flat_job])
    throw DataError(fmt::format("hierarchy: the {} failed (see {}/trials.csv)",
                                !first[coarse_job] ? "coarse classifier" : "flat model",
                                phase_dir(c, "first").string()));

  // Then a sub-classifier per super-class, from the coarse trunk.
  const auto coarse_weights =
      read_pretrained((phase_dir(c, "first") / "0" / "weights.h5").string());
  const std::vector<bool> second = run_training_queue(
      c, "hierarchy", phase_dir(c, "subs"), static_cast<int>(subs.size()),
      [&](int job, const std::function<void()>& serve) {
        const int s = subs[static_cast<std::size_t>(job)];
        const auto& classes = hierarchy.classes[static_cast<std::size_t>(s)];
        std::optional<TrainingData> own;
        return train_job(
            c, job,
            [&] {
              own.emplace(full);
              select_classes(*own, classes, 0, derive_seed(c.config.run.seed, {seed_split, 2}));
              TrainingJob t;
              t.config = model_config(c, spec, base, static_cast<int>(classes.size()),
                                      phase_dir(c, "subs") / std::to_string(job),
                                      2 + static_cast<std::uint64_t>(s));
              t.data = &*own;
              t.checkpoints = checkpoints(fmt::format("sub{}", job));
              t.label = fmt::format("{}: ", hierarchy.names[static_cast<std::size_t>(s)]);
              t.meta.put_text("kind", "sub-classifier");
              t.prepare = [&](Trainer& trainer) {
                load_pretrained(coarse_weights, trainer.model(), {head});
                trainer.broadcast_weights();
              };
              t.finish = write_full_predictions(t.config.output.dir);
              return t;
            },
            serve);
      },
      [&](int job) {
        return fmt::format(
            "sub-classifier {}",
            hierarchy.names[static_cast<std::size_t>(subs[static_cast<std::size_t>(job)])]);
      });
  for (std::size_t j = 0; j < subs.size(); ++j)
    if (!second[j])
      throw DataError(fmt::format("hierarchy: the sub-classifier of {} failed (see {}/trials.csv)",
                                  hierarchy.names[static_cast<std::size_t>(subs[j])],
                                  phase_dir(c, "subs").string()));
  if (!coordinator) return {};

  // Routing, on world rank 0 from the predictions files.
  const SetPredictions coarse =
      read_predictions((phase_dir(c, "first") / "0" / "predictions.h5").string());
  const SetPredictions flat_p =
      read_predictions((phase_dir(c, "first") / "1" / "predictions.h5").string());
  std::vector<std::optional<Predictions>> sub_val(static_cast<std::size_t>(supers)),
      sub_test(static_cast<std::size_t>(supers));
  nlohmann::json sub_rows = nlohmann::json::array();
  for (std::size_t j = 0; j < subs.size(); ++j) {
    const auto s = static_cast<std::size_t>(subs[j]);
    const SetPredictions p =
        read_predictions((phase_dir(c, "subs") / std::to_string(j) / "predictions.h5").string());
    sub_val[s] = Predictions{p.classes, p.validation};
    sub_test[s] = Predictions{p.classes, p.test};
    sub_rows.push_back({{"super_class", hierarchy.names[s]},
                        {"classes", hierarchy.classes[s]},
                        {"weights", fmt::format("hierarchy/subs/{}/weights.h5", j)}});
  }
  const auto super_labels = [&](const std::vector<std::int32_t>& labels) {
    std::vector<std::int32_t> out;
    out.reserve(labels.size());
    for (auto l : labels) out.push_back(super_of[static_cast<std::size_t>(l)]);
    return out;
  };
  const double routed_val =
      accuracy(route(hierarchy, {supers, coarse.validation}, sub_val), full.validation.labels);
  const double routed_test =
      accuracy(route(hierarchy, {supers, coarse.test}, sub_test), full.test.labels);
  nlohmann::json report;
  report["super_classes"] = nlohmann::json::object();
  for (int s = 0; s < supers; ++s)
    report["super_classes"][hierarchy.names[static_cast<std::size_t>(s)]] =
        hierarchy.classes[static_cast<std::size_t>(s)];
  report["coarse_from"] = source ? source->description : "scratch";
  report["coarse"] = {
      {"val_accuracy",
       accuracy_of(coarse.validation, supers, super_labels(full.validation.labels))},
      {"test_accuracy", accuracy_of(coarse.test, supers, super_labels(full.test.labels))},
      {"weights", "hierarchy/first/0/weights.h5"}};
  report["sub_classifiers"] = sub_rows;
  report["hierarchical"] = {{"val_accuracy", routed_val},
                            {"test_accuracy", routed_test},
                            {"parameters", hierarchical_parameters}};
  report["flat"] = {
      {"val_accuracy", accuracy_of(flat_p.validation, full.num_classes, full.validation.labels)},
      {"test_accuracy", accuracy_of(flat_p.test, full.num_classes, full.test.labels)},
      {"parameters", flat_parameters},
      {"weights", "hierarchy/first/1/weights.h5"}};
  report["gain_over_flat_points"] =
      100.0 * (routed_test - report["flat"]["test_accuracy"].get<double>());
  write_text_atomically(fs::path(c.config.output.dir) / "hierarchy_report.json",
                        report.dump(2) + "\n");
  fmt::print(
      "[hierarchy] test acc {:.4f} hierarchical ({} parameters), {:.4f} flat ({} "
      "parameters): {:+.2f} points; coarse {:.4f} on super-classes\n",
      routed_test, hierarchical_parameters, report["flat"]["test_accuracy"].get<double>(),
      flat_parameters, report["gain_over_flat_points"].get<double>(),
      report["coarse"]["test_accuracy"].get<double>());
  fmt::print("[hierarchy] report: {}/hierarchy_report.json\n", c.config.output.dir);
  return {{"report", "hierarchy_report.json"},
          {"weights", "hierarchy/first/0/weights.h5"},
          {"sub_classifiers", sub_rows}};
}

}  // namespace strata
