// The config's sections other than the model and the stages (config_sections.cpp), each read from
// its map with every key checked; config.cpp puts them together.
#pragma once

#include "core/config_reader.hpp"

namespace strata::config_reader {

RunSection parse_run(const MapReader& m);
DataConfig parse_data(const MapReader& m);
TrainingConfig parse_training(const MapReader& m);
OutputConfig parse_output(const MapReader& m);
CheckpointConfig parse_checkpoint(const MapReader& m);

}  // namespace strata::config_reader
