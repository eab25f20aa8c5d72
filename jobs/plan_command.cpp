// `strata plan CONFIG --ranks N`: the decomposition a job of N ranks would get, without starting
// it.
#include <optional>

#include <fmt/format.h>

#include "core/config.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/stage.hpp"

namespace strata {

int plan_command(const std::string& config_path, int ranks, int ranks_per_node_option,
                 const std::vector<std::string>& overrides) {
  const Config config = load_config(config_path, overrides);
  const int per_node = ranks_per_node_option > 0 ? ranks_per_node_option : ranks_per_node(ranks);
  // Counted once, for the plan and for the line below (a search probes many models).
  std::optional<ModelSize> size;
  if (!config.objective) size = largest_model_size(config);
  const Plan plan = plan_run(config, ranks, per_node, size ? &*size : nullptr);
  fmt::print("plan for {} ({}):\n{}", config.run.name, config.file, describe(plan));
  if (config.objective) {
    fmt::print("model: the {} function in {} dimensions\n", config.objective->name,
               config.objective->dims);
    for (const auto& stage : make_stages(config))
      fmt::print("{}", stage->layout_note(config, plan));
    return 0;
  }
  fmt::print(
      "{}: {} parameters, {:.1f} MiB with gradients and optimizer state, {:.1f} MiB per rank\n",
      search_space(config).empty() ? "model" : "models of search trials, at most", size->parameters,
      static_cast<double>(size->bytes) / (1 << 20),
      static_cast<double>(size->bytes_per_shard(plan.model)) / (1 << 20));
  // Stages with their own parallel block are planned on their own (artifact references are
  // checked here too, as `strata run` does before it starts).
  const auto stages = make_stages(config);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const Plan stage_plan =
        config.stages[i].parallel ? stages[i]->plan(config, ranks, per_node) : plan;
    if (config.stages[i].parallel)
      fmt::print("stage {} ({}) with its own parallel block:\n{}", i + 1, stages[i]->name(),
                 describe(stage_plan));
    fmt::print("{}", stages[i]->layout_note(config, stage_plan));
  }
  return 0;
}

}  // namespace strata
