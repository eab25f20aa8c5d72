// The config's sections other than the model and the stages: run, data, training, parallel, output
// and checkpoint, each read from its map with every key checked.
#include "core/config_sections.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <string_view>

#include <fmt/format.h>

#include "core/config_names.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "core/stage_config.hpp"

namespace strata::config_reader {
namespace {

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

constexpr std::array<Choice<int>, 5> signal_choices{{
    {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},
    {"TERM", SIGTERM},
    {"INT", SIGINT},
    {"HUP", SIGHUP},
}};

}  // namespace

RunSection parse_run(const MapReader& m) {
  static constexpr std::string_view known[] = {"name", "seed", "threads", "device", "thread_split"};
  m.allow_only(known);
  RunSection run;
  read(m, "name", run.name);
  read(m, "seed", run.seed);
  read(m, "threads", run.threads, at_least_0);
  read(m, "device", run.device, EnumNames<DeviceChoice>::choices, "device");
  read(m, "thread_split", run.thread_split, EnumNames<ThreadSplit>::choices, "thread_split");
  if (auto t = m.get("thread_split")) run.thread_split_mark = t->mark();
  if (run.device == DeviceChoice::cuda && !built_with_cuda())
    m.require("device").fail(
        "this strata was built without CUDA (no CUDA toolkit, cuDNN or NCCL at build time): "
        "run.device must be auto or cpu");
  return run;
}

std::vector<LrGroup> parse_lr_groups(const Reader& at) {
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

std::vector<int> parse_class_list(const Reader& at) {
  if (!at.node().IsSequence() || at.node().size() == 0)
    at.fail(fmt::format("expected a non-empty list of class labels, got {}",
                        at.node().IsSequence() ? "an empty list" : at.found()));
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
  if (data.read == DataRead::shards)
    for (const char* key : {"classes", "samples_per_class"})
      if (auto v = m.get(key); v && (!data.classes.empty() || data.samples_per_class > 0))
        v->fail(
            "selects samples in memory, and read: shards reads each step's samples from the "
            "file: set data.read: memory");
  if (data.source == DataSource::hdf5 && !m.get("path"))
    m.where().fail("missing required key 'path' (needed when source is hdf5)");
  return data;
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

ParallelConfig parse_parallel(const MapReader& m, ParallelConfig p) {
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
    try {
      read(m, "accumulate", p.accumulate, at_least_1);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(e.what()) + ", or auto (the planner chooses K)");
    }
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

}  // namespace strata::config_reader
