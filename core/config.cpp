#include "core/config.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "core/config_reader.hpp"
#include "core/config_sections.hpp"
#include "core/config_tree.hpp"
#include "core/errors.hpp"
#include "core/model_config.hpp"
#include "core/search_config.hpp"
#include "core/stage_config.hpp"

namespace strata {
namespace {

using namespace config_reader;

std::string read_file(const std::string& path) {
  const auto cannot_read = [&path](int err) {
    return ConfigError(fmt::format("{}: cannot read config file ({})", path,
                                   std::generic_category().message(err)));
  };
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"),
                                                          &std::fclose);
  if (!f) throw cannot_read(errno);
  std::string text;
  std::array<char, 1 << 16> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f.get())) > 0)
    text.append(buffer.data(), n);
  // Reading a directory opens fine on Linux and fails here with EISDIR.
  if (std::ferror(f.get())) throw cannot_read(errno);
  return text;
}

// Relative input paths are read from the config file's directory, so that a config means the same
// from any working directory (a job script's, each task's of a job array).
std::string relative_to_config(const std::string& file, const std::string& path) {
  const std::filesystem::path p(path);
  if (path.empty() || p.is_absolute()) return path;
  return (std::filesystem::path(file).parent_path() / p).lexically_normal().string();
}

// The sections other than stages, from a tree whose "$name" references are already replaced.
Config parse_sections(const YAML::Node& root_node, const std::string& file) {
  const Reader root(root_node, "", to_source_mark(root_node.Mark(), {1, 1}), file);
  const MapReader top(root);
  Config config;
  config.file = file;
  if (auto r = top.get("run")) config.run = parse_run(MapReader(*r));
  parse_model(MapReader(top.require("model")), config);
  if (config.run.thread_split == ThreadSplit::units)
    for (const auto& layer : config.layers)
      if (layer.kind == LayerKind::conv2d)
        throw ConfigError(thread_split_units_error(config, layer.name));
  // An objective needs no data; a model with layers does.
  if (auto d = top.get("data"); d || !config.objective)
    config.data = parse_data(MapReader(top.require("data")));
  config.data.path = relative_to_config(file, config.data.path);
  if (auto t = top.get("training")) {
    config.training = parse_training(MapReader(*t));
    // Every layer named in lr_groups and freeze is a layer of the model.
    std::vector<std::string> known;
    known.reserve(config.layers.size());
    for (const auto& layer : config.layers) known.push_back(layer.name);
    const auto check = [&](const std::string& name, SourceMark at, const char* key) {
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw ConfigError(fmt::format("{}:{}:{}: training.{}: no layer named '{}' (layers: {})",
                                      file, at.line, at.column, key, name, fmt::join(known, ", ")));
    };
    for (const auto& group : config.training.lr_groups)
      for (const auto& name : group.layers) check(name, group.mark, "lr_groups");
    for (const auto& frozen : config.training.freeze) check(frozen.name, frozen.mark, "freeze");
  }
  if (auto p = top.get("parallel")) {
    config.parallel = parse_parallel(MapReader(*p), {});
    config.parallel.mark = p->mark();
    if (config.parallel.allreduce == AllreduceKind::nccl && config.run.device == DeviceChoice::cpu)
      MapReader(*p)
          .require("allreduce")
          .fail("nccl sums on the replicas' GPUs, and run.device is cpu");
  }
  if (auto o = top.get("output")) config.output = parse_output(MapReader(*o));
  if (auto c = top.get("checkpoint")) config.checkpoint = parse_checkpoint(MapReader(*c));
  return config;
}

// Every reference names a parameter of the space and every value the parameter can take fits
// where it is used: each one is tried at its bounds (or each choice), the others at their first.
// The sections of `text` with `values` in place of their references, from a freshly loaded tree.
Config parse_substituted(const std::string& text, const std::string& file,
                         const std::map<std::string, std::string>& values,
                         const std::vector<std::string>& overrides) {
  YAML::Node root = load_config_tree(text, file, overrides);
  substitute(root, values);
  return parse_sections(root, file);
}

// Returns the first value of every parameter, and the largest local batch any probe gave.
std::pair<std::map<std::string, std::string>, int> check_references(
    const std::string& text, const Reader& root, const std::vector<ParamSpec>& space,
    const std::string& file, const std::vector<std::string>& overrides) {
  int largest_local_batch = 0;
  const std::map<std::string, std::string> first = first_probe_values(space);
  std::vector<std::string> names;
  names.reserve(space.size());
  for (const auto& p : space) names.push_back("$" + p.name);
  const auto references = find_references(root);
  for (const auto& ref : references)
    if (!first.contains(ref.name))
      ref.at.fail(
          names.empty()
              ? fmt::format("'${}' refers to a search parameter, but no hpo stage defines a space",
                            ref.name)
              : fmt::format("unknown search parameter '${}' (known: {})", ref.name,
                            fmt::join(names, ", ")));
  // A parameter nothing refers to changes no training: searching it would repeat trainings.
  for (const auto& p : space)
    if (std::none_of(references.begin(), references.end(),
                     [&](const auto& ref) { return ref.name == p.name; }))
      throw ConfigError(fmt::format(
          "{}:{}:{}: stages: hpo: space.{}: search parameter '{}' is not used: nothing in the "
          "config refers to ${} (write ${} where its value goes, or remove it from the space)",
          file, p.mark.line, p.mark.column, p.name, p.name, p.name, p.name));
  // An error at one of the parameter's references says which value caused it; others pass as they
  // are.
  auto at_reference_of = [&](const std::string& message, const std::string& name) {
    for (const auto& ref : references)
      if (ref.name == name && message.starts_with(fmt::format("{}:{}:{}:", file, ref.at.mark().line,
                                                              ref.at.mark().column)))
        return true;
    return false;
  };
  for (const SingleProbe& probe : single_parameter_probes(space)) {
    try {
      largest_local_batch =
          std::max(largest_local_batch,
                   parse_substituted(text, file, probe.values, overrides).training.local_batch);
    } catch (const ConfigError& e) {
      if (!at_reference_of(e.what(), probe.param->name)) throw;
      throw ConfigError(fmt::format("{} (when search parameter {} = {})", e.what(),
                                    probe.param->name, probe.value));
    }
  }
  return {first, largest_local_batch};
}

// Population-based training changes a member's values while it trains and copies weights
// between members: its parameters may only be those a training can change between epochs
// without changing the model's shape, its global batch or its optimizer's kind.
void check_pbt(const HpoSpec& hpo, const Config& config, const Reader& root,
               const std::string& where) {
  if (config.objective)
    throw ConfigError(where +
                      ": pbt trains models and copies their weights; a function objective has "
                      "none (use genetic, random, tpe, gp or grid)");
  if (hpo.interval >= config.training.epochs)
    throw ConfigError(fmt::format(
        "{}: interval is {} epoch(s), but training.epochs is {}: the members would never exploit "
        "each other (expected interval < training.epochs)",
        where, hpo.interval, config.training.epochs));
  static const std::regex changeable(
      R"(training\.optimizer\.(lr|momentum|nesterov|weight_decay|beta1|beta2|eps)|)"
      R"(model\.layers\[\d+\]\.dropout\.rate|training\.schedule\.[a-z_]+)");
  for (const auto& ref : find_references(root))
    if (!std::regex_match(ref.at.path(), changeable))
      ref.at.fail(fmt::format(
          "pbt changes ${} while a model trains, but {} cannot change between epochs (it fixes "
          "the model's shape, the batch or the optimizer's kind); pbt can search "
          "training.optimizer values, training.schedule values and dropout rates",
          ref.name, ref.at.path()));
}

}  // namespace

namespace {

Config parse_tree(const std::string& yaml_text, const std::string& file,
                  const std::vector<std::string>& overrides) {
  const YAML::Node root_node = load_config_tree(yaml_text, file, overrides);
  const Reader root(root_node, "", to_source_mark(root_node.Mark(), {1, 1}), file);
  if (root_node.IsNull())
    root.fail("the config is empty; expected a map with at least 'data' and 'model.layers'");
  if (!root_node.IsMap())
    root.fail(fmt::format("expected a map of sections at the top level, got {}", root.found()));

  const MapReader top(root);
  static constexpr std::string_view known[] = {"run",      "data",   "model",      "training",
                                               "parallel", "output", "checkpoint", "stages"};
  top.allow_only(known);
  // Stages first: an hpo stage defines the search parameters the other sections may refer to.
  std::vector<StageSpec> stages{StageSpec{}};
  if (auto s = top.get("stages")) {
    reject_references(*s);
    stages = parse_stages(*s);
  }
  for (auto& stage : stages)
    if (auto* transfer = std::get_if<TransferSpec>(&stage.settings))
      transfer->pretrained_path = relative_to_config(file, transfer->pretrained_path);
  std::vector<ParamSpec> space;
  for (const auto& stage : stages)
    if (const auto* hpo = std::get_if<HpoSpec>(&stage.settings)) space = hpo->space;
  const auto [first_values, largest_local_batch] =
      check_references(yaml_text, root, space, file, overrides);
  Config config = first_values.empty()
                      ? parse_sections(root_node, file)
                      : parse_substituted(yaml_text, file, first_values, overrides);
  config.text = yaml_text;
  YAML::Emitter resolved;
  resolved << root_node;
  config.resolved_text = std::string(resolved.c_str()) + "\n";
  // Probes set one parameter at a time, each to its bounds and every choice; local_batch refers
  // to one parameter at most, so the probes reach its largest value.
  if (largest_local_batch > config.training.local_batch)
    config.training.largest_searched_local_batch = largest_local_batch;
  for (const auto& stage : stages) {
    const auto* hpo = std::get_if<HpoSpec>(&stage.settings);
    if (hpo == nullptr) continue;
    const auto where =
        fmt::format("{}:{}:{}: stages: hpo", file, stage.mark.line, stage.mark.column);
    if (hpo->algorithm == SearchAlgorithm::pbt) check_pbt(*hpo, config, root, where);
    if (hpo->space.empty() && !config.objective)
      throw ConfigError(
          where + ": missing required key 'space' (only a function objective brings its own)");
    if (!hpo->space.empty() && config.objective)
      throw ConfigError(where + ": a function objective searches its own space; leave 'space' out");
    if (config.objective && (hpo->prune.rule != PruneRule::none || hpo->max_epochs > 0))
      throw ConfigError(where +
                        ": a function objective has no epochs to prune or count; leave 'prune' "
                        "and 'max_epochs' out");
    if (hpo->prune.rule != PruneRule::none && hpo->prune.after_epochs >= config.training.epochs)
      throw ConfigError(fmt::format(
          "{}: prune.after_epochs is {}, but trainings run {} epoch(s): nothing could be stopped "
          "early",
          where, hpo->prune.after_epochs, config.training.epochs));
  }
  if (auto s = top.get("stages")) read_stage_parallel(*s, config.parallel, stages);
  config.stages = std::move(stages);
  return config;
}

}  // namespace

std::string thread_split_units_error(const Config& config, const std::string& layer) {
  const SourceMark at = config.run.thread_split_mark;
  const std::string where =
      at.line > 0 ? fmt::format("{}:{}:{}", config.file, at.line, at.column) : config.file;
  return fmt::format(
      "{}: run.thread_split: units splits the units of dense layers only, and {}; use batch, or "
      "auto",
      where,
      layer.empty() ? std::string("the model has none")
                    : fmt::format("layer {} is not one (it has parameters of its own)", layer));
}

std::string DatasetNames::images_of(const std::string& split) const {
  std::string name = images;
  return name.replace(name.find("{split}"), 7, split);
}

std::string DatasetNames::labels_of(const std::string& split) const {
  std::string name = labels;
  return name.replace(name.find("{split}"), 7, split);
}

Config parse_config(const std::string& yaml_text, const std::string& file,
                    const std::vector<std::string>& overrides) {
  try {
    Config config = parse_tree(yaml_text, file, overrides);
    config.overrides = overrides;
    return config;
  } catch (const ConfigError& e) {
    // A value an override set has no line in the file: the error names the override.
    throw ConfigError(attribute_to_override(e.what(), file, overrides));
  }
}

Config instantiate(const Config& base, const std::map<std::string, std::string>& values) {
  Config config = parse_substituted(base.text, base.file, values, base.overrides);
  config.text = base.text;
  config.overrides = base.overrides;
  config.resolved_text = base.resolved_text;
  config.stages = base.stages;
  return config;
}

const std::vector<ParamSpec>& search_space(const Config& config) {
  static const std::vector<ParamSpec> none;
  for (const auto& stage : config.stages)
    if (const auto* hpo = std::get_if<HpoSpec>(&stage.settings)) return hpo->space;
  return none;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_file(path), path, overrides);
}

}  // namespace strata
