#include "jobs/stage.hpp"

#include <fstream>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "jobs/hpo_stage.hpp"
#include "jobs/train_stage.hpp"

namespace strata {

namespace {

// Independent trainings of the config (one per member); publishes <name>.model, every member's
// final weights and metrics.
class TrainStage final : public Stage {
 public:
  TrainStage(std::string name, bool first) : Stage(std::move(name), first) {}
  std::vector<std::string> publishes() const override { return {name() + ".model"}; }
  void run(const StageContext& context, Artifacts& artifacts) override {
    train_stage(context);
    nlohmann::json members = nlohmann::json::array();
    for (int m = 0; m < context.first_groups; ++m) {
      const auto member = std::filesystem::relative(
          member_dir(context.config, context.first_groups, m), context.run_dir);
      members.push_back({{"member", m},
                         {"weights", (member / "weights.h5").string()},
                         {"metrics", (member / "metrics.jsonl").string()}});
    }
    artifacts.publish(name() + ".model", {{"members", members}});
  }
};

// A search; publishes <name>.best (its best trial: parameters, fitness, best.yaml and weights)
// and <name>.top_k (the keep_top best trials and their weights), as hpo_summary.json has them.
class HpoStage final : public Stage {
 public:
  HpoStage(std::string name, bool first, const HpoSpec& spec)
      : Stage(std::move(name), first), spec_(spec) {}
  std::vector<std::string> publishes() const override {
    return {name() + ".best", name() + ".top_k"};
  }
  void run(const StageContext& context, Artifacts& artifacts) override {
    hpo_stage(context, spec_);
    if (context.output == nullptr) return;
    std::ifstream in(context.output->dir() / "hpo_summary.json");
    const auto summary = nlohmann::json::parse(in, nullptr, false);
    if (summary.is_discarded())
      throw DataError(
          fmt::format("cannot read {}", (context.output->dir() / "hpo_summary.json").string()));
    // Paths in the summary are relative to the stage's directory; artifacts', to the run's.
    const auto in_run = [&](nlohmann::json item) {
      for (const char* key : {"config", "weights"})
        if (item.is_object() && item.contains(key) && item[key].is_string())
          item[key] = (std::filesystem::path(subdirectory()) / item[key].get<std::string>())
                          .lexically_normal()
                          .string();
      return item;
    };
    artifacts.publish(name() + ".best", in_run(summary["best"]));
    nlohmann::json top = nlohmann::json::array();
    if (summary.contains("top"))
      for (const auto& item : summary["top"]) top.push_back(in_run(item));
    artifacts.publish(name() + ".top_k", top);
  }

 private:
  HpoSpec spec_;
};

const char* kind_name(StageKind kind) {
  return kind == StageKind::hpo ? "hpo" : "train";
}

}  // namespace

std::vector<std::unique_ptr<Stage>> make_stages(const Config& config) {
  std::vector<std::unique_ptr<Stage>> stages;
  std::map<StageKind, int> seen;
  for (const StageSpec& spec : config.stages) {
    const int n = ++seen[spec.kind];
    const std::string name =
        n == 1 ? kind_name(spec.kind) : fmt::format("{}{}", kind_name(spec.kind), n);
    if (spec.kind == StageKind::hpo)
      stages.push_back(std::make_unique<HpoStage>(name, n == 1, spec.hpo));
    else
      stages.push_back(std::make_unique<TrainStage>(name, n == 1));
  }
  return stages;
}

}  // namespace strata
