#include "jobs/stage.hpp"

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "jobs/ensemble_stage.hpp"
#include "jobs/hierarchy_stage.hpp"
#include "jobs/hpo_stage.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/train_stage.hpp"
#include "jobs/transfer_stage.hpp"

namespace strata {

namespace {

// Paths in a stage's own files are relative to the stage's directory; artifacts', to the run's.
nlohmann::json in_run(const std::string& subdirectory, nlohmann::json item) {
  for (const char* key : {"config", "weights", "report", "predictions", "metrics"})
    if (item.is_object() && item.contains(key) && item[key].is_string())
      item[key] = (std::filesystem::path(subdirectory) / item[key].get<std::string>())
                      .lexically_normal()
                      .string();
  for (const char* list : {"members", "sub_classifiers"})
    if (item.is_object() && item.contains(list))
      for (auto& member : item[list]) member = in_run(subdirectory, member);
  return item;
}

// Independent trainings of the config (one per member); publishes <name>.model, every member's
// final weights and metrics.
class TrainStage final : public Stage {
 public:
  TrainStage(std::string name, bool first, const StageSpec& spec)
      : Stage(std::move(name), first, spec) {}
  std::vector<std::string> publishes() const override { return {name() + ".model"}; }
  // Nothing idles here: every group trains a copy, which a user who wanted one training with more
  // ranks would not expect.
  std::string layout_note(const Config& run, const Plan& plan, int members) const override {
    const Config c = config(run);
    if (members == 0) members = plan.groups;
    if (members == 1 || c.parallel.layout == RankLayout::data) return "";
    return fmt::format(
        "note: stage {}: {} member groups train {} independent copies of this config (seeds "
        "derived from run.seed), each in {}/; parallel.layout: data gives every rank to one "
        "training instead\n",
        name(), std::min(members, plan.groups), members,
        (std::filesystem::path(c.output.dir) / subdirectory() / "members" / "<m>")
            .lexically_normal()
            .string());
  }
  void run(const StageContext& context, Artifacts& artifacts) override {
    train_stage(context);
    nlohmann::json members = nlohmann::json::array();
    for (int m = 0; m < context.first_groups; ++m) {
      const auto member = std::filesystem::relative(
          member_dir(context.config, context.first_groups, m), context.run_dir);
      members.push_back({{"member", m},
                         {"weights", (member / "weights.h5").lexically_normal().string()},
                         {"metrics", (member / "metrics.jsonl").lexically_normal().string()}});
    }
    artifacts.publish(name() + ".model", {{"members", members}});
  }
};

// A search; publishes <name>.best (its best trial: parameters, fitness, best.yaml and weights)
// and <name>.top_k (the keep_top best trials, each with its config and weights), as
// hpo_summary.json has them.
class HpoStage final : public Stage {
 public:
  HpoStage(std::string name, bool first, const StageSpec& spec)
      : Stage(std::move(name), first, spec) {}
  std::vector<std::string> publishes() const override {
    return {name() + ".best", name() + ".top_k"};
  }
  std::optional<int> concurrent_trainings(const Config& /*run*/) const override {
    const auto& h = std::get<HpoSpec>(spec().settings);
    int most = h.algorithm == SearchAlgorithm::genetic || h.algorithm == SearchAlgorithm::pbt
                   ? h.population
               : runs_trials(h.algorithm) ? h.trials
                                          : 0;
    if (h.max_trainings > 0) most = most > 0 ? std::min(most, h.max_trainings) : h.max_trainings;
    return most > 0 ? std::optional(most) : std::nullopt;
  }
  void run(const StageContext& context, Artifacts& artifacts) override {
    hpo_stage(context, std::get<HpoSpec>(spec().settings));
    if (context.output == nullptr) return;
    std::ifstream in(context.output->dir() / "hpo_summary.json");
    const auto summary = nlohmann::json::parse(in, nullptr, false);
    if (summary.is_discarded())
      throw DataError(
          fmt::format("cannot read {}", (context.output->dir() / "hpo_summary.json").string()));
    artifacts.publish(name() + ".best", in_run(subdirectory(), summary["best"]));
    nlohmann::json top = nlohmann::json::array();
    if (summary.contains("top"))
      for (const auto& item : summary["top"]) top.push_back(in_run(subdirectory(), item));
    artifacts.publish(name() + ".top_k", top);
  }
};

// Members from the run's config or an earlier search's best configs, trained on the member groups
// and combined over the peers; publishes <name>.members (each member's config and weights, and the
// report).
class EnsembleStage final : public Stage {
 public:
  EnsembleStage(std::string name, bool first, const StageSpec& spec)
      : Stage(std::move(name), first, spec) {}
  std::vector<std::string> publishes() const override { return {name() + ".members"}; }
  std::optional<int> concurrent_trainings(const Config& run) const override {
    const EnsembleSpec& e = settings();
    int bases = 1;
    if (e.from && !e.from->name.ends_with(".best")) {
      bases = e.members;
      if (bases == 0)
        for (const auto& stage : run.stages)
          if (const auto* hpo = std::get_if<HpoSpec>(&stage.settings)) bases = hpo->keep_top;
    }
    const int variations = !e.feature_subsets.empty() ? static_cast<int>(e.feature_subsets.size())
                                                      : std::max({1, e.seeds, e.bagging});
    return std::max(bases, 1) * variations;
  }
  std::vector<Read> reads() const override {
    const auto& from = settings().from;
    if (!from) return {};
    return {{*from, {".top_k", ".best"}, "an ensemble's members come from a search's"}};
  }
  void run(const StageContext& context, Artifacts& artifacts) override {
    // Every rank loads the same member configs from the artifact all ranks hold.
    const auto bases = bases_of(context, artifacts);
    const nlohmann::json published = ensemble_stage(context, settings(), bases);
    if (context.topology.world_rank() == 0)
      artifacts.publish(name() + ".members", in_run(subdirectory(), published));
  }

 private:
  const EnsembleSpec& settings() const { return std::get<EnsembleSpec>(spec().settings); }

  std::vector<EnsembleBase> bases_of(const StageContext& c, const Artifacts& artifacts) const {
    const auto& from = settings().from;
    if (!from) return {EnsembleBase{"the run's config", c.config}};
    const nlohmann::json& value = artifacts.get(from->name);
    std::vector<nlohmann::json> items;
    if (value.is_array())
      items.assign(value.begin(), value.end());
    else if (!value.is_null())
      items.push_back(value);
    if (settings().members > 0 && static_cast<int>(items.size()) > settings().members)
      items.resize(static_cast<std::size_t>(settings().members));
    if (items.empty())
      throw DataError(fmt::format("{}: the ensemble's {} holds no trial (did every trial fail?)",
                                  name(), from->name));
    std::vector<EnsembleBase> bases;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto path = c.run_dir / items[i].at("config").get<std::string>();
      bases.push_back({fmt::format("{}[{}]: trial {}", from->name, i, items[i].value("trial", -1)),
                       load_config(path.string())});
    }
    if (settings().members > static_cast<int>(bases.size()) && c.topology.world_rank() == 0)
      fmt::print("[ensemble] note: members: {} asked, but {} holds {} configs\n",
                 settings().members, from->name, bases.size());
    return bases;
  }
};

// Fine-tunes an earlier stage's weights (hpo.best, train.model, transfer.model) or a weights file
// or checkpoint; publishes <name>.model (config, weights, report).
class TransferStage final : public Stage {
 public:
  TransferStage(std::string name, bool first, const StageSpec& spec)
      : Stage(std::move(name), first, spec) {}
  std::vector<std::string> publishes() const override { return {name() + ".model"}; }
  std::optional<int> concurrent_trainings(const Config& /*run*/) const override {
    const TransferSpec& t = settings();
    // A hierarchy trains the coarse and the flat model, then one sub-classifier per super-class.
    if (!t.hierarchy.empty()) return std::max(2, static_cast<int>(t.hierarchy.size()));
    return t.compare_scratch ? 2 : 1;
  }
  std::vector<Read> reads() const override {
    const auto& from = settings().pretrained_artifact;
    if (!from) return {};
    return {{*from, {".best", ".model"}, "transfer starts from the weights of a"}};
  }
  void check(const Config& run, const std::string& key) const override {
    check_transfer(config(run), settings(), key, spec().mark);
  }
  void run(const StageContext& context, Artifacts& artifacts) override {
    const TransferSpec& spec = settings();
    const bool has_source = spec.pretrained_artifact || !spec.pretrained_path.empty();
    const nlohmann::json published =
        !spec.hierarchy.empty()
            ? hierarchy_stage(context, spec,
                              has_source ? std::optional(source(context, artifacts)) : std::nullopt)
            : transfer_stage(context, spec, source(context, artifacts));
    if (context.topology.world_rank() == 0)
      artifacts.publish(name() + ".model", in_run(subdirectory(), published));
  }

 private:
  const TransferSpec& settings() const { return std::get<TransferSpec>(spec().settings); }

  PretrainedSource source(const StageContext& c, const Artifacts& artifacts) const {
    const TransferSpec& spec = settings();
    if (!spec.pretrained_artifact) {
      // A file path; one under output.dir that an earlier stage was to write is looked for now.
      if (!std::filesystem::exists(spec.pretrained_path))
        throw ConfigError(fmt::format(
            "{}:{}:{}: {}.pretrained: no file {} (it lies in output.dir, and no earlier stage "
            "wrote it)",
            c.config.file, spec.pretrained_mark.line, spec.pretrained_mark.column,
            stage_key(c.stage_index, StageKind::transfer), spec.pretrained_path));
      return {"a file", spec.pretrained_path, c.config};
    }
    const std::string& artifact = spec.pretrained_artifact->name;
    const nlohmann::json& value = artifacts.get(artifact);
    // A search's best names its config; a train stage's members train the run's config.
    if (value.is_object() && value.contains("config") && value.contains("weights"))
      return {
          fmt::format(
              "{}{}", artifact,
              value.contains("trial") ? fmt::format(" (trial {})", value["trial"].get<int>()) : ""),
          (c.run_dir / value["weights"].get<std::string>()).string(),
          load_config((c.run_dir / value["config"].get<std::string>()).string())};
    if (value.is_object() && value.contains("members") && !value["members"].empty())
      return {artifact + " (member 0)",
              (c.run_dir / value["members"][0]["weights"].get<std::string>()).string(), c.config};
    throw DataError(
        fmt::format("{}: {} holds no weights (did every trial fail?)", name(), artifact));
  }
};

// A reference to an artifact that no earlier stage publishes, or one of the wrong kind, fails at
// its line before anything runs.
void check_reads(const Config& config, const Stage& stage, const std::set<std::string>& published) {
  for (const Stage::Read& read : stage.reads()) {
    const ArtifactRef& ref = read.ref;
    const auto where = fmt::format("{}:{}:{}: stages: {}", config.file, ref.mark.line,
                                   ref.mark.column, stage.name());
    if (!published.contains(ref.name))
      throw ConfigError(fmt::format(
          "{}: no earlier stage publishes '{}' (published before this stage: {})", where, ref.name,
          published.empty() ? "none" : fmt::format("{}", fmt::join(published, ", "))));
    if (std::none_of(read.kinds.begin(), read.kinds.end(),
                     [&](const std::string& kind) { return ref.name.ends_with(kind); }))
      throw ConfigError(fmt::format("{}: '{}' will not do: {} {}", where, ref.name, read.purpose,
                                    fmt::join(read.kinds, " or ")));
  }
}

}  // namespace

std::string Stage::layout_note(const Config& run, const Plan& plan, int /*members*/) const {
  const auto most = concurrent_trainings(run);
  if (!most || *most >= plan.groups) return "";
  return fmt::format(
      "note: stage {} runs at most {} training(s) at once, so {} of the G = {} member groups will "
      "be idle; {} ranks (G = {}) would do the same work\n",
      name(), *most, plan.groups - *most, plan.groups, *most * plan.group_size(), *most);
}

Plan Stage::plan(const Config& run, int world_size, int ranks_per_node) const {
  return plan_run(config(run), world_size, ranks_per_node);
}

std::vector<std::unique_ptr<Stage>> make_stages(const Config& config) {
  if (config.objective && (config.stages.size() != 1 || config.stages[0].kind() != StageKind::hpo))
    throw ConfigError(
        fmt::format("{}: model.objective: a function objective replaces training: the stages must "
                    "be one hpo stage to search it",
                    config.file));
  std::vector<std::unique_ptr<Stage>> stages;
  std::map<StageKind, int> seen;
  std::set<std::string> published;
  for (const StageSpec& spec : config.stages) {
    const int n = ++seen[spec.kind()];
    const std::string name =
        n == 1 ? to_string(spec.kind()) : fmt::format("{}{}", to_string(spec.kind()), n);
    switch (spec.kind()) {
      case StageKind::train:
        stages.push_back(std::make_unique<TrainStage>(name, n == 1, spec));
        break;
      case StageKind::hpo:
        stages.push_back(std::make_unique<HpoStage>(name, n == 1, spec));
        break;
      case StageKind::ensemble:
        if (!std::get<EnsembleSpec>(spec.settings).from && !search_space(config).empty())
          throw ConfigError(fmt::format(
              "{}:{}:{}: stages: {}: the config has a search space, so its members need the "
              "search's values: from: hpo.best or hpo.top_k",
              config.file, spec.mark.line, spec.mark.column, name));
        stages.push_back(std::make_unique<EnsembleStage>(name, n == 1, spec));
        break;
      case StageKind::transfer:
        stages.push_back(std::make_unique<TransferStage>(name, n == 1, spec));
        break;
    }
    check_reads(config, *stages.back(), published);
    stages.back()->check(config, stage_key(stages.size() - 1, spec.kind()));
    for (const auto& artifact : stages.back()->publishes()) published.insert(artifact);
  }
  return stages;
}

}  // namespace strata
