// The config's stages section: each stage's kind and settings, and its own parallel block.
#pragma once

#include <string>
#include <vector>

#include "core/config_reader.hpp"

namespace strata::config_reader {

std::vector<StageSpec> parse_stages(const Reader& list);

// The parallel block of each stage in `list` that has one, over `run`'s settings (a key the stage
// leaves out keeps the run's value).
void read_stage_parallel(const Reader& list, const ParallelConfig& run,
                         std::vector<StageSpec>& stages);

// "hpo.best", "train2.model": a stage name, a dot, an artifact; anything else (a transfer's
// pretrained "weights.h5", "runs/a/ckpt-3.h5") is a file path.
bool names_artifact(const std::string& text);

// A list of layer names, each with its place in the file (training.freeze, transfer.head).
std::vector<FrozenLayer> parse_layer_names(const Reader& at);

// training.lr_groups' list of {layers: [names], lr_scale: x} (config_sections.cpp).
std::vector<LrGroup> parse_lr_groups(const Reader& at);

// A list of distinct class labels ("[5, 6, 7]") (config_sections.cpp).
std::vector<int> parse_class_list(const Reader& at);

// The parallel section's keys over `base` (config_sections.cpp).
ParallelConfig parse_parallel(const MapReader& m, ParallelConfig base);

}  // namespace strata::config_reader
