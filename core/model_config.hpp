// The config's model section: the layers to train, or an analytic objective.
#pragma once

#include "core/config.hpp"
#include "core/config_reader.hpp"

namespace strata::config_reader {

// Either layers to train (checked: known kinds and parameters, model-parallel splits that pair up)
// or an analytic objective, never both; the result goes into `config`.
void parse_model(const MapReader& m, Config& config);

}  // namespace strata::config_reader
