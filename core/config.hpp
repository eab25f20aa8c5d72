// The run configuration: the whole config as one struct, and its checked loader.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/search_params.hpp"
#include "core/section_specs.hpp"
#include "core/stage_specs.hpp"

namespace strata {

struct Config {
  std::string file;  // the YAML file it was loaded from
  std::string text;  // its YAML source, from which each search trial's config is made
  // `--set key.path=value` overrides, applied after ${VAR} expansion to every tree made from text
  std::vector<std::string> overrides;
  // The tree the run reads, as YAML: environment variables expanded and overrides applied.
  std::string resolved_text;
  RunSection run;
  DataConfig data;
  std::vector<LayerSpec> layers;  // empty when `objective` is set
  std::optional<ObjectiveSpec> objective;
  TrainingConfig training;
  ParallelConfig parallel;
  OutputConfig output;
  CheckpointConfig checkpoint;
  std::vector<StageSpec> stages;  // defaults to one train stage
};

// Loads and checks a config: ${VAR} and ${VAR:-default} in its values are expanded from the
// environment, then `overrides` ("training.epochs=3", "model.layers[1].dense.units=64") applied.
// Throws ConfigError whose message names the file, line, column (or the override), the key path
// (e.g. "training.optimizer.lr") and what was expected.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same, from YAML text; `file` is only used in messages.
Config parse_config(const std::string& yaml_text, const std::string& file,
                    const std::vector<std::string>& overrides = {});

// The message of the ConfigError for run.thread_split: units on a model with `layer`, a layer
// with parameters other than a dense one (empty: a model without dense layers).
std::string thread_split_units_error(const Config& config, const std::string& layer);

// A search trial's config: `base` with every "$name" replaced by values.at(name), a YAML scalar
// ("0.01", "32", "adam"). Throws ConfigError as parse_config does.
Config instantiate(const Config& base, const std::map<std::string, std::string>& values);

// The YAML text of a plain training config: `base` with every "$name" replaced by values.at(name),
// no stages section (so one train stage), and output.dir set to `output_dir`. What a search
// writes as best.yaml: runnable as it is with `strata run`.
std::string trial_config_text(const Config& base, const std::map<std::string, std::string>& values,
                              const std::string& output_dir);

// A plain config file that trains `config` as a stage built it: trial_config_text of its source
// with the values a stage sets in the struct written in (run.seed; training.epochs, local_batch
// and optimizer.lr; data.classes and samples_per_class; the last dense layer's units).
std::string trained_config_text(const Config& config);

// The search space of the config's hpo stage, empty when it has none.
const std::vector<ParamSpec>& search_space(const Config& config);

const char* to_string(LayerKind kind);

// The config a stage runs: `config` with the stage's parallel block in place of the run's.
Config stage_config(const Config& config, const StageSpec& stage);

}  // namespace strata
