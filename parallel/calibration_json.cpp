#include "parallel/calibration_json.hpp"

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/config_names.hpp"
#include "core/errors.hpp"

namespace strata {

namespace {

SplitKind split_from(const std::string& name, const std::string& source) {
  for (const auto& choice : EnumNames<SplitKind>::choices)
    if (choice.name == name) return choice.value;
  throw DataError(fmt::format("{}: unknown split '{}'", source, name));
}

void check_spread(const std::vector<double>& spread, const std::string& source) {
  for (double point : spread)
    if (!(point > 0.0) || !std::isfinite(point))
      throw DataError(fmt::format(
          "{}: a step's spread holds {}: its points are steps over their mean, positive", source,
          point));
}

nlohmann::json step_json(const StepTiming& step) {
  nlohmann::json out{{"threads", step.threads}, {"step_s", step.step_s}};
  if (!step.spread.empty()) out["spread"] = step.spread;
  return out;
}

// Calibrations before the spread was measured lack it.
std::vector<double> spread_from_json(const nlohmann::json& json, const char* key) {
  return json.contains(key) ? json.at(key).get<std::vector<double>>() : std::vector<double>{};
}

StepTiming step_from_json(const nlohmann::json& json) {
  return StepTiming{json.at("threads").get<int>(), json.at("step_s").get<double>(),
                    spread_from_json(json, "spread")};
}

nlohmann::json steps_json(const std::vector<StepTiming>& steps) {
  nlohmann::json out = nlohmann::json::array();
  for (const StepTiming& s : steps) out.push_back(step_json(s));
  return out;
}

std::vector<StepTiming> steps_from_json(const nlohmann::json& json) {
  std::vector<StepTiming> steps;
  for (const auto& s : json) steps.push_back(step_from_json(s));
  return steps;
}

}  // namespace

nlohmann::json calibration_to_json(const Calibration& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerTiming& l : c.layers)
    layers.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"split", to_string(l.split)},
                      {"gathers_output", l.gathers_output},
                      {"needs_input_gradient", l.needs_input_gradient},
                      {"tensors", l.tensors},
                      {"input_elements", l.input_elements},
                      {"output_elements", l.output_elements},
                      {"forward_s", l.forward_s},
                      {"backward_s", l.backward_s}});
  nlohmann::json out{{"format", "strata-calibration"},
                     {"version", 1},
                     {"config", c.config},
                     {"cpu", c.cpu},
                     {"cores", c.cores},
                     {"local_batch", c.local_batch},
                     {"bucket_mib", c.bucket_mib},
                     {"layers", layers},
                     {"data_s", c.data_s},
                     {"optimizer_s", c.optimizer_s},
                     {"steps", steps_json(c.steps)}};
  if (c.intra_node)
    out["intra_node"] = {{"ranks", c.intra_node_ranks},
                         {"latency_s", c.intra_node->latency_s},
                         {"bytes_per_s", c.intra_node->bytes_per_s}};
  if (c.split_step_s > 0.0)
    out["split_over_2"] = {{"step_s", c.split_step_s}, {"optimizer_s", c.split_optimizer_s}};
  if (c.split_step_s > 0.0 && !c.split_spread.empty())
    out["split_over_2"]["spread"] = c.split_spread;
  if (c.split_step_s > 0.0 && c.shared_split_step_s > 0.0)
    out["split_over_2"]["all_pairs_step_s"] = c.shared_split_step_s;
  if (c.split_step_s > 0.0 && !c.shared_split_spread.empty())
    out["split_over_2"]["all_pairs_spread"] = c.shared_split_spread;
  if (c.intra_node && !c.shared_steps.empty())
    out["intra_node"]["shared_steps"] = steps_json(c.shared_steps);
  if (c.intra_node && c.replica_pairs_step)
    out["intra_node"]["replica_pairs_step"] = step_json(*c.replica_pairs_step);
  return out;
}

Calibration calibration_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    if (!j.is_object() || j.value("format", "") != "strata-calibration")
      throw DataError(
          fmt::format("{}: not a strata calibration (no \"format\": "
                      "\"strata-calibration\"); write one with strata calibrate",
                      source));
    if (j.value("version", 0) != 1)
      throw DataError(
          fmt::format("{}: calibration version {} is not 1", source, j.value("version", 0)));
    Calibration c;
    c.config = j.at("config").get<std::string>();
    c.cpu = j.at("cpu").get<std::string>();
    c.cores = j.at("cores").get<int>();
    c.local_batch = j.at("local_batch").get<int>();
    c.bucket_mib = j.at("bucket_mib").get<double>();
    for (const auto& l : j.at("layers"))
      c.layers.push_back(LayerTiming{
          l.at("name").get<std::string>(), l.at("kind").get<std::string>(),
          split_from(l.at("split").get<std::string>(), source), l.at("gathers_output").get<bool>(),
          l.at("needs_input_gradient").get<bool>(),
          l.at("tensors").get<std::vector<std::int64_t>>(),
          l.at("input_elements").get<std::int64_t>(), l.at("output_elements").get<std::int64_t>(),
          l.at("forward_s").get<double>(), l.at("backward_s").get<double>()});
    c.data_s = j.at("data_s").get<double>();
    c.optimizer_s = j.at("optimizer_s").get<double>();
    c.steps = steps_from_json(j.at("steps"));
    if (j.contains("intra_node")) {
      const auto& link = j.at("intra_node");
      c.intra_node =
          LinkCost{link.at("latency_s").get<double>(), link.at("bytes_per_s").get<double>()};
      c.intra_node_ranks = link.at("ranks").get<int>();
      if (link.contains("shared_steps")) c.shared_steps = steps_from_json(link.at("shared_steps"));
      // Calibrations before the share-of-cores step held the one-thread step alone.
      else if (link.contains("shared_step_s"))
        c.shared_steps = {StepTiming{1, link.at("shared_step_s").get<double>(), {}}};
      if (link.contains("replica_pairs_step"))
        c.replica_pairs_step = step_from_json(link.at("replica_pairs_step"));
    }
    if (j.contains("split_over_2")) {
      c.split_step_s = j.at("split_over_2").at("step_s").get<double>();
      c.split_optimizer_s = j.at("split_over_2").at("optimizer_s").get<double>();
      c.shared_split_step_s = j.at("split_over_2").value("all_pairs_step_s", 0.0);
      c.split_spread = spread_from_json(j.at("split_over_2"), "spread");
      c.shared_split_spread = spread_from_json(j.at("split_over_2"), "all_pairs_spread");
    }
    if (c.steps.empty() || c.steps.front().threads != 1)
      throw DataError(fmt::format("{}: \"steps\" must start with the one-thread step", source));
    std::vector<StepTiming> all = c.steps;
    all.insert(all.end(), c.shared_steps.begin(), c.shared_steps.end());
    if (c.replica_pairs_step) all.push_back(*c.replica_pairs_step);
    for (const StepTiming& s : all)
      if (s.threads < 1 || !(s.step_s > 0.0))
        throw DataError(
            fmt::format("{}: a step on {} thread(s) of {} s: steps need a positive "
                        "thread count and time",
                        source, s.threads, s.step_s));
    for (const StepTiming& s : all) check_spread(s.spread, source);
    check_spread(c.split_spread, source);
    check_spread(c.shared_split_spread, source);
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: {}", source, e.what()));
  }
}

}  // namespace strata
