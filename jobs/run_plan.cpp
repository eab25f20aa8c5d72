#include "jobs/run_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config_names.hpp"
#include "core/dataset.hpp"
#include "core/errors.hpp"
#include "core/model.hpp"

namespace strata {

namespace {

// A sample's shape and the data's classes, read once for every model a search probes (a file
// without num_classes has every label read to count them).
struct DataShape {
  Shape sample;
  int classes = 0;
};

DataShape data_shape(const Config& config) {
  if (config.data.source == DataSource::synthetic) {
    const auto& s = config.data.synthetic;
    return {{s.channels, s.height, s.width}, s.classes};
  }
  const Dataset first_rows = read_dataset(config.data.path, 1, 1, config.data.names);
  return {{first_rows.train.channels, first_rows.train.height, first_rows.train.width},
          first_rows.num_classes};
}

ModelSize model_size(const Config& config, const DataShape& data) {
  const int classes =
      config.data.classes.empty() ? data.classes : static_cast<int>(config.data.classes.size());
  Model model(config.layers, data.sample, classes, 0, config.file);
  ModelSize size;
  size.parameters = model.parameter_count();
  const int optimizer_slots = config.training.optimizer.kind == OptimizerKind::adam ? 2
                              : config.training.optimizer.momentum != 0.0           ? 1
                                                                                    : 0;
  const auto bytes_per_parameter = static_cast<std::int64_t>(sizeof(float)) * (2 + optimizer_slots);
  size.bytes = size.parameters * bytes_per_parameter;
  // What a shard holds 1/M of: a column split's weight and bias, a row split's weight only (its
  // bias is added once, after the allreduce, so every shard keeps it whole).
  std::map<std::string, SplitKind> split;
  for (const auto& spec : config.layers)
    if (spec.split != SplitKind::none) split[spec.name] = spec.split;
  for (std::size_t i = 0; i < model.layer_count(); ++i) {
    const auto kind = split.find(model.layer(i).name());
    if (kind == split.end()) continue;
    for (const Param& p : model.layer(i).params())
      if (kind->second == SplitKind::column || p.name.ends_with("/weight"))
        size.split_bytes += p.value->size() * bytes_per_parameter;
  }
  return size;
}

}  // namespace

ModelSize model_size(const Config& config) {
  return model_size(config, data_shape(config));
}

void check_class_labels(const Config& config) {
  struct Labels {
    const std::vector<int>* classes;
    std::string where;
    bool relabelled = false;  // labels of the data after data.classes relabelled it 0..k-1
  };
  std::vector<Labels> lists;
  if (!config.data.classes.empty()) lists.push_back({&config.data.classes, ": data.classes"});
  for (std::size_t i = 0; i < config.stages.size(); ++i) {
    const StageSpec& stage = config.stages[i];
    const auto* transfer = std::get_if<TransferSpec>(&stage.settings);
    if (transfer == nullptr) continue;
    if (!transfer->classes.empty())
      lists.push_back(
          {&transfer->classes, fmt::format(":{}:{}: {}.classes", stage.mark.line, stage.mark.column,
                                           stage_key(i, StageKind::transfer))});
    for (const SuperClassSpec& super : transfer->hierarchy)
      lists.push_back({&super.classes,
                       fmt::format(":{}:{}: {}.hierarchical.{}", super.mark.line, super.mark.column,
                                   stage_key(i, StageKind::transfer), super.name),
                       true});
  }
  if (lists.empty() || config.objective) return;
  const int in_file = data_shape(config).classes;
  for (const Labels& list : lists) {
    const int classes = list.relabelled && !config.data.classes.empty()
                            ? static_cast<int>(config.data.classes.size())
                            : in_file;
    for (const int label : *list.classes)
      if (label >= classes)
        throw ConfigError(
            fmt::format("{}{}: class {} is not one of the data's {} classes (0 to {})", config.file,
                        list.where, label, classes, classes - 1));
  }
}

ModelSize largest_model_size(const Config& config) {
  const auto& space = search_space(config);
  if (space.empty()) return model_size(config);
  const DataShape data = data_shape(config);
  // Bounds over every model probed: the largest unsplit part and the largest split part, which
  // may come from different trials. A shard planned for their sum holds any of them.
  ModelSize bound;
  std::int64_t whole = 0;
  bool built = false;
  std::string first_error;
  std::map<std::map<std::string, std::string>, std::int64_t> probed;  // values -> bytes, -1: none
  auto bytes_at = [&](const std::map<std::string, std::string>& values) {
    if (const auto known = probed.find(values); known != probed.end()) return known->second;
    std::int64_t bytes = -1;
    try {
      const ModelSize size = model_size(instantiate(config, values), data);
      bytes = size.bytes;
      built = true;
      whole = std::max(whole, size.bytes - size.split_bytes);
      bound.split_bytes = std::max(bound.split_bytes, size.split_bytes);
      bound.parameters = std::max(bound.parameters, size.parameters);
    } catch (const ConfigError& e) {
      // A trial that cannot be built fails alone when the search reaches it.
      if (first_error.empty()) first_error = e.what();
    }
    probed[values] = bytes;
    return bytes;
  };
  // Coordinate ascent over the probes (each parameter's bounds and choices): each parameter takes
  // the probe that gives the largest model with the others at their current values, round after
  // round until none changes, since parameters interact (a larger kernel shrinks what follows).
  std::map<std::string, std::string> current = first_probe_values(space);
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& p : space) {
      std::int64_t best = bytes_at(current);
      for (const auto& value : probe_values(p)) {
        auto values = current;
        values[p.name] = value;
        if (const std::int64_t bytes = bytes_at(values); bytes > best) {
          best = bytes;
          current = values;
          changed = true;
        }
      }
    }
  }
  // Every trial would fail: say so now, not after a search of failures.
  if (!built) {
    SourceMark at;
    for (const auto& stage : config.stages)
      if (std::holds_alternative<HpoSpec>(stage.settings)) at = stage.mark;
    throw ConfigError(fmt::format(
        "{}:{}:{}: stages: hpo: space: no model the search can try builds ({} probes: each "
        "parameter at its bounds and each choice); the first: {}",
        config.file, at.line, at.column, probed.size(), first_error));
  }
  bound.bytes = whole + bound.split_bytes;
  bound.largest_trial = current;
  return bound;
}

int ranks_per_node(int measured) {
  if (const char* env = std::getenv("STRATA_RANKS_PER_NODE")) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || value < 1)
      throw ConfigError(fmt::format("STRATA_RANKS_PER_NODE='{}' is not a positive integer", env));
    return static_cast<int>(value);
  }
  return measured;
}

namespace {

// The planner's request from the config's parallel section, for `local_batch` on `world_size`
// ranks; M and D as the config fixes them.
PlanRequest request_from(const Config& config, int world_size, int ranks_per_node,
                         int local_batch) {
  const ParallelConfig& p = config.parallel;
  PlanRequest request;
  request.world_size = world_size;
  request.local_batch = local_batch;
  request.max_global_batch = p.max_global_batch;
  request.fixed_model = p.model;
  request.fixed_data = p.data;
  request.accumulate = p.accumulate;
  request.ranks_per_node = ranks_per_node;
  request.one_group = p.layout == RankLayout::data;
  return request;
}

}  // namespace

Plan plan_run(const Config& config, int world_size, int ranks_per_node,
              const ModelSize* known_size) {
  const ParallelConfig& p = config.parallel;
  const auto& searched = config.training.largest_searched_local_batch;
  PlanRequest request = request_from(config, world_size, ranks_per_node,
                                     std::max(config.training.local_batch, searched.value_or(0)));
  if (p.memory_per_rank_mib > 0 && !config.objective) {
    const ModelSize largest = known_size != nullptr ? *known_size : largest_model_size(config);
    request.model_bytes = largest.bytes;
    request.split_bytes = largest.split_bytes;
    request.memory_per_rank_bytes = static_cast<std::int64_t>(p.memory_per_rank_mib * (1 << 20));
  }
  try {
    Plan plan = make_plan(request);
    if (searched)
      plan.reasons.push_back(fmt::format(
          "local batch: planned for {}, the largest a search trial can have{}", *searched,
          p.accumulate == 0 && p.max_global_batch > 0
              ? "; with accumulate: auto each trial accumulates to the bound for its own"
              : ""));
    return plan;
  } catch (const ConfigError& e) {
    // The file's line is not the whole story when the command line changed what was planned.
    std::vector<std::string> planned_overrides;
    for (const std::string& o : config.overrides)
      if (o.starts_with("parallel.") || o.starts_with("training.local_batch="))
        planned_overrides.push_back("--set " + o);
    throw ConfigError(fmt::format(
        "{}:{}:{}: {}{}", config.file, p.mark.line, p.mark.column, e.what(),
        planned_overrides.empty() ? ""
                                  : fmt::format(" (with {})", fmt::join(planned_overrides, ", "))));
  }
}

Plan plan_on_run_layout(const Config& config, const Plan& run) {
  PlanRequest request =
      request_from(config, run.world_size, run.ranks_per_node, config.training.local_batch);
  request.fixed_model = run.model;
  request.fixed_data = run.data;
  try {
    return make_plan(request);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("local batch {} on the run's D = {}: {}",
                                  config.training.local_batch, run.data, e.what()));
  }
}

}  // namespace strata
