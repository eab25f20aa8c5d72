// `strata plan CONFIG --ranks N`: the decomposition a job of N ranks would get, without starting
// it; with --predict, the cost model's step time for each rank count.
#include <algorithm>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/config_names.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/stage.hpp"
#include "parallel/calibration_json.hpp"
#include "parallel/step_cost.hpp"

namespace strata {

namespace {

// Where the plan's ranks would train, as run.device decides it (core/device.hpp), and what this
// node's CUDA runtime sees (the node `strata plan` runs on, often not a compute node).
std::string device_line(const Config& config, const Plan& plan) {
  const char* choice = to_string(config.run.device);
  if (config.run.device == DeviceChoice::cpu)
    return "device: run.device cpu: every rank trains on the CPU\n";
  const DeviceReport here = detect_devices();
  const std::string split =
      plan.model > 1
          ? fmt::format("; the model's M = {} shards each need a GPU of their own, {}", plan.model,
                        config.run.device == DeviceChoice::cuda ? "or the run stops"
                                                                : "else all train on the CPU")
          : std::string();
  return fmt::format(
      "device: run.device {}: forward and backward on one GPU per rank{}{}; this node: {}\n",
      choice,
      config.run.device == DeviceChoice::cuda ? " (every rank needs one)"
                                              : " where a node has them, else the CPU",
      split, here.cuda_devices > 0 ? here.detail : here.summary);
}

void print_plan(const Config& config, int ranks, int ranks_per_node_option) {
  const int per_node = ranks_per_node_option > 0 ? ranks_per_node_option : ranks_per_node(ranks);
  // What `strata run` refuses before it starts, plan refuses before it prints.
  const auto stages = make_stages(config);
  check_class_labels(config);
  // Counted once, for the plan and for the line below (a search probes many models).
  std::optional<ModelSize> size;
  if (!config.objective) size = largest_model_size(config);
  const Plan plan = plan_run(config, ranks, per_node, size ? &*size : nullptr);
  fmt::print("plan for {} ({}):\n{}", config.run.name, config.file, describe(plan));
  if (config.objective) {
    fmt::print("model: the {} function in {} dimensions\n", config.objective->name,
               config.objective->dims);
    for (const auto& stage : stages) fmt::print("{}", stage->layout_note(config, plan));
    return;
  }
  fmt::print(
      "{}: {} parameters, {:.1f} MiB with gradients and optimizer state, {:.1f} MiB per rank\n",
      search_space(config).empty() ? "model" : "models of search trials, at most", size->parameters,
      static_cast<double>(size->bytes) / (1 << 20),
      static_cast<double>(size->bytes_per_shard(plan.model)) / (1 << 20));
  fmt::print("{}", device_line(config, plan));
  // Stages with their own parallel block are planned on their own.
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const Plan stage_plan =
        config.stages[i].parallel ? stages[i]->plan(config, ranks, per_node) : plan;
    if (config.stages[i].parallel)
      fmt::print("stage {} ({}) with its own parallel block:\n{}", i + 1, stages[i]->name(),
                 describe(stage_plan));
    fmt::print("{}", stages[i]->layout_note(config, stage_plan));
  }
}

Calibration read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DataError(fmt::format(
        "no calibration at {}: run `strata calibrate CONFIG --out {}` first, on the kind of node "
        "the job will run on (under mpiexec -n R to time R ranks of one node)",
        path, path));
  nlohmann::json json;
  try {
    in >> json;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  return calibration_from_json(json, path);
}

// The preset (or, for "local", the calibration's own node with no network), then the overrides.
PredictionSettings prediction_settings(const PlanOptions& o, const Calibration& c) {
  PredictionSettings s;
  if (o.network == "local") {
    const bool given = o.intra_latency_us >= 0 && o.intra_gbs > 0;
    if (!c.intra_node && !given)
      throw ConfigError(fmt::format(
          "--network local takes the intra-node MPI figures from the calibration, and {} has none: "
          "calibrate under mpiexec -n 2 (or more), or give --intra-latency-us and --intra-gbs",
          o.calibration_path));
    const LinkCost node = c.intra_node ? *c.intra_node : LinkCost{};
    s.network = NetworkCost{"local", node, node};  // one node: nothing crosses a network
    s.calibrated_node = true;
  } else {
    s.network = network_preset(o.network);
  }
  if (o.intra_latency_us >= 0) s.network.intra_node.latency_s = o.intra_latency_us * 1e-6;
  if (o.intra_gbs > 0) s.network.intra_node.bytes_per_s = o.intra_gbs * 1e9;
  if (o.inter_latency_us >= 0) s.network.inter_node.latency_s = o.inter_latency_us * 1e-6;
  if (o.inter_gbs > 0) s.network.inter_node.bytes_per_s = o.inter_gbs * 1e9;
  if (o.network == "local" && o.inter_latency_us < 0 && o.inter_gbs <= 0)
    s.network.inter_node = s.network.intra_node;
  s.cores_per_node = o.cores_per_node > 0 ? o.cores_per_node : c.cores;
  return s;
}

int print_predictions(const Config& config, const PlanOptions& o) {
  if (config.objective)
    throw ConfigError(
        fmt::format("{}: --predict needs a model; this config optimises the {} "
                    "function",
                    config.file, config.objective->name));
  const Calibration c = read_calibration(o.calibration_path);
  PredictionSettings settings = prediction_settings(o, c);
  settings.allreduce = config.parallel.allreduce;
  settings.threads = config.run.threads;  // 0: as strata run, the rank's share of the cores
  const ModelSize size = largest_model_size(config);
  const auto per_node_for = [&](int ranks) {
    return o.ranks_per_node > 0 ? o.ranks_per_node : ranks_per_node(ranks);
  };
  // One rank alone on a node training the local batch: what every speedup is measured against
  // (whether or not the config's parallel block allows one rank).
  Plan alone;
  alone.local_batch = alone.max_global_batch = c.local_batch;
  const StepCost one = predict_step(c, alone, settings);
  fmt::print(
      "predicted from {} ({}, local batch {}, {} cores per node{}); network {}: intra-node "
      "{:.2f} us, {:.1f} GB/s; between nodes {:.2f} us, {:.1f} GB/s; allreduce {}\n",
      o.calibration_path, c.cpu, c.local_batch, settings.cores_per_node,
      c.config == config.file ? "" : fmt::format(", calibrated for {}", c.config),
      settings.network.name, 1e6 * settings.network.intra_node.latency_s,
      settings.network.intra_node.bytes_per_s / 1e9, 1e6 * settings.network.inter_node.latency_s,
      settings.network.inter_node.bytes_per_s / 1e9, to_string(settings.allreduce));
  fmt::print(
      "| ranks | nodes | G x D x M | global batch | threads | step ms | compute | model-par. | "
      "data-par. | samples/s per group | samples/s all groups | speedup | efficiency per node "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int ranks : o.ranks) {
    const int per_node = per_node_for(ranks);
    const Plan plan = plan_run(config, ranks, per_node, &size);
    const StepCost cost = predict_step(c, plan, settings);
    const int nodes = (ranks + per_node - 1) / per_node;
    const double speedup = cost.total_samples_per_s / one.total_samples_per_s;
    fmt::print(
        "| {} | {} | {} x {} x {} | {} | {}{} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | "
        "{:.0f} "
        "| {:.1f} | {:.2f} |\n",
        ranks, nodes, plan.groups, plan.data, plan.model, plan.global_batch(), cost.threads,
        cost.slowdown_measured
            ? fmt::format(" ({:.2f}x, measured: {}{})", cost.compute_slowdown, cost.measured_as,
                          cost.slowest_replica > 1.0
                              ? fmt::format(", {:.2f}x of it the slowest of {} {}",
                                            cost.slowest_replica, cost.waits_for,
                                            cost.waits_for == plan.data ? "replicas" : "ranks")
                              : "")
            : (cost.oversubscription > 1.0 ? fmt::format(" ({:.1f}x over)", cost.oversubscription)
                                           : ""),
        1e3 * cost.step_s, 1e3 * cost.compute_s, 1e3 * cost.model_parallel_s,
        1e3 * cost.data_parallel_s, cost.samples_per_s, cost.total_samples_per_s, speedup,
        speedup / nodes);
  }
  return 0;
}

}  // namespace

int plan_command(const PlanOptions& o) {
  const Config config = load_config(o.config_path, o.overrides);
  if (o.predict) {
    if (o.ranks.size() == 1) print_plan(config, o.ranks.front(), o.ranks_per_node);
    return print_predictions(config, o);
  }
  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    if (i > 0) fmt::print("\n");
    print_plan(config, o.ranks[i], o.ranks_per_node);
  }
  return 0;
}

}  // namespace strata
