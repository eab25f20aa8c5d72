#include "core/config.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "core/config_names.hpp"
#include "core/config_reader.hpp"
#include "core/config_tree.hpp"
#include "core/device.hpp"
#include "core/model_config.hpp"
#include "core/errors.hpp"
#include "core/search_config.hpp"
#include "core/stage_config.hpp"

namespace strata {
namespace {

using namespace config_reader;

// ---------------------------------------------------------------------------------------------
// Sections

RunSection parse_run(const MapReader& m) {
  static constexpr std::string_view known[] = {"name", "seed", "threads", "device"};
  m.allow_only(known);
  RunSection run;
  read(m, "name", run.name);
  read(m, "seed", run.seed);
  read(m, "threads", run.threads, at_least_0);
  read(m, "device", run.device, EnumNames<DeviceChoice>::choices, "device");
  if (run.device == DeviceChoice::cuda && !built_with_cuda())
    m.require("device").fail(
        "this strata was built without CUDA (no CUDA toolkit, cuDNN or NCCL at build time): "
        "run.device must be auto or cpu");
  return run;
}

SyntheticSpec parse_synthetic(const MapReader& m) {
  static constexpr std::string_view known[] = {"train",    "test",   "classes",
                                               "channels", "height", "width"};
  m.allow_only(known);
  SyntheticSpec s;
  read(m, "train", s.train, at_least_1);
  read(m, "test", s.test, at_least_1);
  read(m, "classes", s.classes, IntRange{2, 256});
  read(m, "channels", s.channels, at_least_1);
  read(m, "height", s.height, at_least_1);
  read(m, "width", s.width, at_least_1);
  return s;
}

}  // namespace

std::vector<LrGroup> config_reader::parse_lr_groups(const Reader& at) {
  if (!at.node().IsSequence())
    at.fail(fmt::format("expected a list of {{layers: [names], lr_scale: x}}, got {}", at.found()));
  std::vector<LrGroup> groups;
  for (std::size_t i = 0; i < at.node().size(); ++i) {
    const MapReader g(at.item(i, at.node()[i]));
    static constexpr std::string_view group_keys[] = {"layers", "lr_scale"};
    g.allow_only(group_keys);
    LrGroup group;
    group.mark = g.where().mark();
    const Reader layers = g.require("layers");
    if (!layers.node().IsSequence() || layers.node().size() == 0)
      layers.fail(fmt::format("expected a non-empty list of layer names, got {}", layers.found()));
    for (std::size_t k = 0; k < layers.node().size(); ++k)
      group.layers.push_back(layers.item(k, layers.node()[k]).as_nonempty_string());
    group.lr_scale = g.require("lr_scale").as_number(non_negative);
    groups.push_back(std::move(group));
  }
  return groups;
}

std::vector<int> config_reader::parse_class_list(const Reader& at) {
  if (!at.node().IsSequence() || at.node().size() == 0)
    at.fail(fmt::format("expected a non-empty list of class labels, got {}", at.found()));
  std::vector<int> classes;
  for (std::size_t i = 0; i < at.node().size(); ++i) {
    const Reader item = at.item(i, at.node()[i]);
    const int c = item.as_int(IntRange{0});
    if (std::find(classes.begin(), classes.end(), c) != classes.end())
      item.fail(fmt::format("class {} is listed twice", c));
    classes.push_back(c);
  }
  return classes;
}

namespace {

DataConfig parse_data(const MapReader& m) {
  static constexpr std::string_view known[] = {
      "source", "path",    "validation_fraction", "train_subset", "test_subset", "synthetic",
      "read",   "classes", "samples_per_class",   "images",       "labels"};
  m.allow_only(known);
  DataConfig data;
  if (auto c = m.get("classes")) data.classes = parse_class_list(*c);
  read(m, "samples_per_class", data.samples_per_class, at_least_0);
  read(m, "source", data.source, EnumNames<DataSource>::choices, "data source");
  read(m, "path", data.path);
  // Both splits from one name would train and test on the same samples.
  for (auto [key, name] : {std::pair{"images", &data.names.images}, {"labels", &data.names.labels}})
    if (auto v = m.get(key)) {
      *name = v->as_nonempty_string();
      if (name->find("{split}") == std::string::npos)
        v->fail(
            fmt::format("'{}' names one dataset for both splits; write {{split}} where train or "
                        "test goes, e.g. x_{{split}}",
                        *name));
    }
  read(m, "validation_fraction", data.validation_fraction, NumRange{0.0, 0.5});
  read(m, "train_subset", data.train_subset, at_least_0);
  read(m, "test_subset", data.test_subset, at_least_0);
  if (auto s = m.get("synthetic")) data.synthetic = parse_synthetic(MapReader(*s));
  read(m, "read", data.read, EnumNames<DataRead>::choices, "read mode");
  if (data.source == DataSource::synthetic && data.read == DataRead::shards)
    m.get("read")->fail("shards reads an HDF5 file; synthetic data lives in memory");
  if (data.source == DataSource::hdf5 && !m.get("path"))
    m.where().fail("missing required key 'path' (needed when source is hdf5)");
  return data;
}

// --- training ---

OptimizerSpec parse_optimizer(const MapReader& m) {
  OptimizerSpec opt;
  read(m, "type", opt.kind, EnumNames<OptimizerKind>::choices, "optimizer type");

  static constexpr std::string_view sgd_keys[] = {"type", "lr", "momentum", "nesterov",
                                                  "weight_decay"};
  static constexpr std::string_view adam_keys[] = {"type",  "lr",  "beta1",
                                                   "beta2", "eps", "weight_decay"};
  static constexpr KeyOwner owners[] = {{"momentum", "sgd"},
                                        {"nesterov", "sgd"},
                                        {"beta1", "adam"},
                                        {"beta2", "adam"},
                                        {"eps", "adam"}};
  m.allow_only(opt.kind == OptimizerKind::sgd ? Keys(sgd_keys) : Keys(adam_keys), owners,
               "optimizer type");

  read(m, "lr", opt.lr, positive);
  read(m, "weight_decay", opt.weight_decay, non_negative);
  read(m, "momentum", opt.momentum, zero_to_one_open);
  read(m, "nesterov", opt.nesterov);
  read(m, "beta1", opt.beta1, zero_to_one_open);
  read(m, "beta2", opt.beta2, zero_to_one_open);
  read(m, "eps", opt.eps, positive);
  return opt;
}

ScheduleSpec parse_schedule(const MapReader& m) {
  ScheduleSpec s;
  read(m, "type", s.kind, EnumNames<ScheduleKind>::choices, "schedule type");

  static constexpr std::string_view constant_keys[] = {"type", "warmup_epochs"};
  static constexpr std::string_view step_keys[] = {"type", "warmup_epochs", "step_epochs", "gamma"};
  static constexpr std::string_view cosine_keys[] = {"type", "warmup_epochs", "min_lr"};
  static constexpr KeyOwner owners[] = {
      {"step_epochs", "step"}, {"gamma", "step"}, {"min_lr", "cosine"}};
  Keys known = constant_keys;
  if (s.kind == ScheduleKind::step) known = step_keys;
  if (s.kind == ScheduleKind::cosine) known = cosine_keys;
  m.allow_only(known, owners, "schedule type");

  read(m, "warmup_epochs", s.warmup_epochs, non_negative);
  read(m, "step_epochs", s.step_epochs, positive);
  read(m, "gamma", s.gamma, NumRange{0.0, 1.0, true, false});
  read(m, "min_lr", s.min_lr, non_negative);
  return s;
}

TrainingConfig parse_training(const MapReader& m) {
  static constexpr std::string_view known[] = {"epochs",   "local_batch", "optimizer",
                                               "schedule", "freeze",      "lr_groups"};
  m.allow_only(known);
  TrainingConfig t;
  if (auto groups = m.get("lr_groups")) t.lr_groups = parse_lr_groups(*groups);
  if (auto f = m.get("freeze")) t.freeze = parse_layer_names(*f);
  read(m, "epochs", t.epochs, at_least_1);
  read(m, "local_batch", t.local_batch, at_least_1);
  if (auto o = m.get("optimizer")) t.optimizer = parse_optimizer(MapReader(*o));
  if (auto s = m.get("schedule")) t.schedule = parse_schedule(MapReader(*s));
  return t;
}

}  // namespace

ParallelConfig config_reader::parse_parallel(const MapReader& m, ParallelConfig p) {
  static constexpr std::string_view known[] = {
      "max_global_batch", "model",      "data",       "memory_per_rank_mib",
      "bucket_mib",       "lr_scaling", "accumulate", "watchdog_s",
      "layout",           "allreduce"};
  m.allow_only(known);
  read(m, "max_global_batch", p.max_global_batch, at_least_0);
  read(m, "model", p.model, at_least_0);
  read(m, "data", p.data, at_least_0);
  read(m, "memory_per_rank_mib", p.memory_per_rank_mib, non_negative);
  read(m, "bucket_mib", p.bucket_mib, non_negative);
  read(m, "lr_scaling", p.lr_scaling, EnumNames<LrScaling>::choices, "lr_scaling");
  // "auto" lets the planner pick K; a number fixes it.
  if (auto k = m.get("accumulate"); k && k->node().IsScalar() && k->node().Scalar() == "auto")
    p.accumulate = 0;
  else
    read(m, "accumulate", p.accumulate, at_least_1);
  read(m, "watchdog_s", p.watchdog_s, non_negative);
  read(m, "layout", p.layout, EnumNames<RankLayout>::choices, "layout");
  read(m, "allreduce", p.allreduce, EnumNames<AllreduceKind>::choices, "allreduce");
  if (p.allreduce == AllreduceKind::nccl && !built_with_cuda())
    m.require("allreduce")
        .fail(
            "this strata was built without CUDA (no CUDA toolkit, cuDNN or NCCL at build time): "
            "parallel.allreduce must be auto, mpi or hierarchical");
  return p;
}

namespace {

OutputConfig parse_output(const MapReader& m) {
  static constexpr std::string_view known[] = {"dir", "progress_seconds", "trace"};
  m.allow_only(known);
  OutputConfig out;
  read(m, "dir", out.dir);
  if (auto d = m.get("dir")) out.dir_mark = d->mark();
  read(m, "progress_seconds", out.progress_seconds, positive);
  read(m, "trace", out.trace);
  return out;
}

constexpr std::array<Choice<int>, 5> signal_choices{{
    {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},
    {"TERM", SIGTERM},
    {"INT", SIGINT},
    {"HUP", SIGHUP},
}};

CheckpointConfig parse_checkpoint(const MapReader& m) {
  static constexpr std::string_view known[] = {"every_steps", "every_seconds", "keep", "signal"};
  m.allow_only(known);
  CheckpointConfig c;
  read(m, "every_steps", c.every_steps, at_least_0);
  read(m, "every_seconds", c.every_seconds, non_negative);
  read(m, "keep", c.keep, at_least_1);
  // One checkpoint alone would be lost to a crash while it is being replaced by the next.
  if (c.keep < 2)
    if (auto k = m.get("keep"))
      k->fail("keep at least 2 checkpoints, so that a crash during a write leaves one");
  read(m, "signal", c.signal, signal_choices, "signal");
  for (const auto& choice : signal_choices)
    if (choice.value == c.signal) c.signal_name = std::string(choice.name);
  return c;
}

// ---------------------------------------------------------------------------------------------

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
  // An objective needs no data; a model with layers does.
  if (auto d = top.get("data"); d || !config.objective)
    config.data = parse_data(MapReader(top.require("data")));
  config.data.path = relative_to_config(file, config.data.path);
  if (auto t = top.get("training")) {
    config.training = parse_training(MapReader(*t));
    for (const auto& group : config.training.lr_groups)
      for (const auto& name : group.layers) {
        bool found = false;
        for (const auto& layer : config.layers) found = found || layer.name == name;
        if (!found)
          throw ConfigError(fmt::format("{}:{}:{}: training.lr_groups: no layer named '{}'", file,
                                        group.mark.line, group.mark.column, name));
      }
    // Every frozen name is a layer of the model.
    for (const auto& frozen : config.training.freeze) {
      std::string known;
      bool found = false;
      for (const auto& layer : config.layers) {
        found = found || layer.name == frozen.name;
        known += (known.empty() ? "" : ", ") + layer.name;
      }
      if (!found)
        throw ConfigError(fmt::format("{}:{}:{}: training.freeze: no layer named '{}' (layers: {})",
                                      file, frozen.mark.line, frozen.mark.column, frozen.name,
                                      known));
    }
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
  std::map<std::string, std::string> first;
  for (const auto& p : space) first[p.name] = probe_values(p).front();
  std::vector<std::string> names;
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
  for (const auto& p : space)
    for (const auto& value : probe_values(p)) {
      auto values = first;
      values[p.name] = value;
      try {
        largest_local_batch =
            std::max(largest_local_batch,
                     parse_substituted(text, file, values, overrides).training.local_batch);
      } catch (const ConfigError& e) {
        if (!at_reference_of(e.what(), p.name)) throw;
        throw ConfigError(
            fmt::format("{} (when search parameter {} = {})", e.what(), p.name, value));
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
  if (auto s = top.get("stages")) stages = parse_stages(*s);
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
