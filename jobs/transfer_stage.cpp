#include "jobs/transfer_stage.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/atomic_file.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "core/pretrained.hpp"
#include "core/rng.hpp"
#include "core/search_params.hpp"
#include "jobs/training_queue.hpp"

namespace strata {

namespace {

constexpr int fine_tuned = 0, from_scratch = 1;

std::filesystem::path jobs_dir(const StageContext& c) {
  return std::filesystem::path(c.config.output.dir) / "transfer";
}

// The layers whose parameters start fresh: the spec's head, or the last layer with parameters
// when the label set changes.
std::set<std::string> head_layers(const TransferSpec& spec, const Config& model) {
  std::set<std::string> head;
  for (const auto& h : spec.head) head.insert(h.name);
  // A new label set resizes the last layer with parameters: it cannot take the old weights.
  if (!spec.classes.empty())
    for (auto it = model.layers.rbegin(); it != model.layers.rend(); ++it)
      if (it->kind == LayerKind::dense || it->kind == LayerKind::conv2d) {
        head.insert(it->name);
        break;
      }
  return head;
}

}  // namespace

void check_layer_names(const std::string& config_file, const std::string& key,
                       const TransferSpec& spec, const Config& model,
                       const std::vector<Config>& variants) {
  std::set<std::string> names;
  std::string known;
  for (const auto& layer : model.layers) {
    names.insert(layer.name);
    known += (known.empty() ? "" : ", ") + layer.name;
  }
  for (const Config& variant : variants)
    for (const auto& layer : variant.layers)
      if (names.insert(layer.name).second) known += ", " + layer.name;
  const auto check = [&](const std::string& name, SourceMark at, const char* list) {
    if (!names.contains(name))
      throw ConfigError(
          fmt::format("{}:{}:{}: {}.{}: the pretrained model has no layer '{}' (layers: {})",
                      config_file, at.line, at.column, key, list, name, known));
  };
  for (const auto& f : spec.freeze) check(f.name, f.mark, "freeze");
  for (const auto& h : spec.head) check(h.name, h.mark, "head");
  for (const auto& g : spec.lr_groups)
    for (const auto& name : g.layers) check(name, g.mark, "lr_groups");
  if (!spec.classes.empty()) {
    const auto last = std::find_if(model.layers.rbegin(), model.layers.rend(), [](const auto& l) {
      return l.kind == LayerKind::dense || l.kind == LayerKind::conv2d;
    });
    if (last == model.layers.rend() || last->kind != LayerKind::dense)
      throw ConfigError(
          fmt::format("{}:{}:{}: {}.classes: a new label set resizes the last dense layer, and the "
                      "pretrained model's last layer with parameters is no dense layer",
                      config_file, spec.pretrained_mark.line, spec.pretrained_mark.column, key));
  }
}

namespace {

// Whether `file` lies under `dir` (both made absolute from the working directory).
bool lies_under(const std::filesystem::path& file, const std::filesystem::path& dir) {
  const auto f = std::filesystem::absolute(file).lexically_normal();
  const auto d = std::filesystem::absolute(dir).lexically_normal();
  const auto [at_dir, at_file] = std::mismatch(d.begin(), d.end(), f.begin(), f.end());
  return at_dir == d.end() || (at_dir->empty() && std::next(at_dir) == d.end());
}

}  // namespace

void check_transfer(const Config& config, const TransferSpec& spec, const std::string& key,
                    SourceMark at) {
  // A file path is relative to the config file's directory, as data.path is. A file in the run's
  // own output.dir may be one an earlier stage writes: the stage looks for it when it starts.
  if (!spec.pretrained_artifact && !spec.pretrained_path.empty() &&
      !lies_under(spec.pretrained_path, config.output.dir) &&
      !std::filesystem::exists(spec.pretrained_path))
    throw ConfigError(fmt::format("{}:{}:{}: {}.pretrained: no file {}", config.file,
                                  spec.pretrained_mark.line, spec.pretrained_mark.column, key,
                                  spec.pretrained_path));
  // A search's best trial can differ from the config in a layer whose kind is searched (relu_2
  // against tanh_2), so a name counts when any probe of the space has it; the stage checks the
  // trial's own names when it starts.
  std::vector<Config> variants;
  if (spec.pretrained_artifact)
    for (const SingleProbe& probe : single_parameter_probes(search_space(config))) {
      try {
        variants.push_back(instantiate(config, probe.values));
      } catch (const ConfigError&) {
        // A probe that does not build is a trial that fails alone.
      }
    }
  check_layer_names(config.file, key, spec, config, variants);
  const bool selects =
      !spec.classes.empty() || spec.samples_per_class > 0 || !spec.hierarchy.empty();
  if (selects && config.data.source == DataSource::hdf5 && config.data.read == DataRead::shards)
    throw ConfigError(fmt::format(
        "{}:{}:{}: {}: a new label set, samples_per_class or a hierarchy selects samples "
        "in memory, and data.read: shards reads each step's samples from the file: set "
        "data.read: memory",
        config.file, at.line, at.column, key));
}

namespace {

// Training `job` (fine-tuned or from scratch) on the stage's data, a new label set if it has one;
// both start from the same seed, so the head starts alike. The baseline freezes nothing.
Config job_config(const StageContext& c, const TransferSpec& spec, const PretrainedSource& source,
                  int job) {
  Config config = fine_tuning_config(
      c, spec, source.config, static_cast<int>(spec.classes.size()),
      jobs_dir(c) / std::to_string(job),
      derive_seed(c.config.run.seed, {seed_transfer, static_cast<std::uint64_t>(c.stage_index)}));
  if (!spec.classes.empty()) config.data.classes = spec.classes;
  if (spec.samples_per_class > 0) config.data.samples_per_class = spec.samples_per_class;
  if (job != fine_tuned) {
    config.training.freeze.clear();
    config.training.lr_groups.clear();
  }
  return config;
}

nlohmann::json job_result(const std::filesystem::path& dir,
                          const std::filesystem::path& stage_dir) {
  const auto relative = std::filesystem::relative(dir, stage_dir);
  nlohmann::json result = {{"weights", (relative / "weights.h5").string()},
                           {"config", (relative / "config.yaml").string()},
                           {"metrics", (relative / "metrics.jsonl").string()}};
  std::ifstream in(dir / "metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const auto metrics = nlohmann::json::parse(last, nullptr, false);
  if (!metrics.is_discarded() && metrics.is_object())
    for (const char* key : {"epoch", "val_accuracy", "test_accuracy", "test_loss"})
      result[key] = metrics[key];
  return result;
}

}  // namespace

Config fine_tuning_config(const StageContext& c, const TransferSpec& spec, const Config& base,
                          int classes, const std::filesystem::path& dir, std::uint64_t seed) {
  Config config = base;
  config.data = c.config.data;
  config.parallel = c.config.parallel;
  config.checkpoint = c.config.checkpoint;
  config.output = c.config.output;
  config.output.dir = dir.string();
  if (spec.epochs > 0) config.training.epochs = spec.epochs;
  if (spec.local_batch > 0) config.training.local_batch = spec.local_batch;
  if (spec.lr > 0) config.training.optimizer.lr = spec.lr;
  config.training.freeze = spec.freeze;
  config.training.lr_groups = spec.lr_groups;
  if (classes > 0)
    for (auto it = config.layers.rbegin(); it != config.layers.rend(); ++it)
      if (it->kind == LayerKind::dense) {
        it->units = classes;
        break;
      }
  config.run.seed = seed;
  return config;
}

nlohmann::json transfer_stage(const StageContext& c, const TransferSpec& spec,
                              const PretrainedSource& source) {
  const bool coordinator = c.topology.world_rank() == 0;
  check_layer_names(c.config.file, stage_key(c.stage_index, StageKind::transfer), spec,
                    source.config);
  const std::set<std::string> head = head_layers(spec, source.config);
  // Every rank reads the weights (each loads its own replica or shard) and their normalisation,
  // which the data takes, so the model sees its inputs as it was trained to.
  const PretrainedWeights weights = read_pretrained(source.weights);
  Config data_config = job_config(c, spec, source, fine_tuned);
  data_config.run.seed = c.config.run.seed;  // the run's split, as the pretraining had it
  const TrainingData data =
      load_training_data(data_config, weights.normalisation ? &*weights.normalisation : nullptr);
  const int jobs = spec.compare_scratch ? 2 : 1;
  if (coordinator) {
    fmt::print(
        "[transfer] from {} ({}): {} training / {} validation / {} test samples of {} classes; "
        "frozen: {}; fresh: {}; normalisation {}{}\n",
        source.description, source.weights, data.train.count(), data.validation.count(),
        data.test.count(), data.num_classes, spec.freeze.size(), fmt::join(head, ", "),
        weights.normalisation ? "from the weights" : "of this data (the weights record none)",
        spec.compare_scratch ? "; and the same from scratch" : "");
    std::fflush(stdout);
  }
  const std::vector<bool> done = run_training_queue(
      c, "transfer", jobs_dir(c), jobs,
      [&](int job, const std::function<void()>& serve) {
        return train_job(
            c, job,
            [&] {
              TrainingJob t;
              t.config = job_config(c, spec, source, job);
              t.data = &data;
              t.checkpoints = std::filesystem::path(c.config.output.dir) / "checkpoints" /
                              fmt::format("stage{}", c.stage_index) /
                              (job == fine_tuned ? "transfer" : "scratch");
              t.label = job == fine_tuned ? "transfer: " : "scratch: ";
              t.meta.put_text("kind", job == fine_tuned ? "transfer" : "transfer baseline");
              t.meta.put_int("stage", c.stage_index);
              if (job == fine_tuned)
                t.prepare = [&](Trainer& trainer) {
                  load_pretrained(weights, trainer.model(), head);
                  trainer.broadcast_weights();
                };
              t.finish = [&c, config = t.config](Trainer&) {
                if (c.topology.member().rank() == 0)
                  write_text_atomically(std::filesystem::path(config.output.dir) / "config.yaml",
                                        trained_config_text(config));
              };
              return t;
            },
            serve);
      },
      [](int job) { return job == fine_tuned ? "fine-tuned" : "from scratch"; });
  if (!done[fine_tuned])
    throw DataError(
        fmt::format("transfer: the fine-tuning failed (see {}/trials.csv)", jobs_dir(c).string()));
  if (!coordinator) return {};
  const std::filesystem::path stage_dir(c.config.output.dir);
  nlohmann::json report;
  report["pretrained"] = {{"source", source.description}, {"weights", source.weights}};
  report["classes"] = spec.classes;
  report["samples_per_class"] = spec.samples_per_class;
  report["training_samples"] = data.train.count();
  report["frozen"] = nlohmann::json::array();
  for (const auto& f : spec.freeze) report["frozen"].push_back(f.name);
  report["fresh"] = head;
  report["normalisation"] = {{"mean", data.mean},
                             {"stddev", data.stddev},
                             {"from_weights", weights.normalisation.has_value()}};
  report["fine_tuned"] = job_result(jobs_dir(c) / "0", stage_dir);
  if (spec.compare_scratch && done[from_scratch]) {
    report["scratch"] = job_result(jobs_dir(c) / "1", stage_dir);
    report["gain_over_scratch_points"] =
        100.0 * (report["fine_tuned"]["test_accuracy"].get<double>() -
                 report["scratch"]["test_accuracy"].get<double>());
    fmt::print("[transfer] test acc {:.4f} fine-tuned, {:.4f} from scratch ({:+.2f} points)\n",
               report["fine_tuned"]["test_accuracy"].get<double>(),
               report["scratch"]["test_accuracy"].get<double>(),
               report["gain_over_scratch_points"].get<double>());
  }
  write_text_atomically(stage_dir / "transfer_report.json", report.dump(2) + "\n");
  fmt::print("[transfer] report: {}/transfer_report.json\n", stage_dir.string());
  return {{"config", report["fine_tuned"]["config"]},
          {"weights", report["fine_tuned"]["weights"]},
          {"report", "transfer_report.json"}};
}

}  // namespace strata
