// The transfer stage of `strata run`: fine-tunes pretrained weights (an earlier stage's, or a
// weights file or checkpoint) on the stage's data, a new label set if it has one, with frozen
// layers, a fresh head and per-layer learning rates; beside it, when asked, the same model trained
// from scratch on the same samples, into transfer_report.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// Where the pretrained weights come from, resolved from the config or an artifact.
struct PretrainedSource {
  std::string description;  // "hpo.best (trial 7)", "a file"
  std::string weights;      // a weights file or checkpoint
  Config config;            // the config whose model the weights fit
};

// `base` (the pretrained model's config) as a transfer stage trains it: the stage's data, layout,
// checkpoints and output `dir`; the stage's epochs, local batch, lr, frozen layers and
// learning-rate groups; its last dense layer sized for `classes` labels (0: as it is); and `seed`.
Config fine_tuning_config(const StageContext& c, const TransferSpec& spec, const Config& base,
                          int classes, const std::filesystem::path& dir, std::uint64_t seed);

// Every layer the spec names (freeze, head, lr_groups) exists in `model`, and a new label set has a
// last dense layer to resize: a ConfigError at the name in `config_file` otherwise, alike on every
// rank before anything collective. `key`: the stage's key path ("stages[2].transfer").
// `variants`: other models whose names also count (the probes of a search space).
void check_layer_names(const std::string& config_file, const std::string& key,
                       const TransferSpec& spec, const Config& model,
                       const std::vector<Config>& variants = {});

// What a transfer stage (at key path `key`) can find wrong before the run starts, so that an error
// in it does not wait for the stages before it to train: its pretrained file exists (unless it lies
// in output.dir, where an earlier stage may write it), the layers it names exist (unless the
// weights are a search's: then a name any probe of its space has), and a new label set or
// few-sample selection is not asked of data read in shards. `at`: the stage's place in the file.
void check_transfer(const Config& config, const TransferSpec& spec, const std::string& key,
                    SourceMark at);

// Collective over the world. Returns, on world rank 0, the <stage>.model artifact (paths
// relative to the stage's directory).
nlohmann::json transfer_stage(const StageContext& context, const TransferSpec& spec,
                              const PretrainedSource& source);

}  // namespace strata
