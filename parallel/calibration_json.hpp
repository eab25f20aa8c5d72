// calibration.json, the file strata calibrate writes and strata plan --predict reads: format
// "strata-calibration", version 1; files from before a measurement was added read without it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "parallel/step_cost.hpp"

namespace strata {

nlohmann::json calibration_to_json(const Calibration& calibration);
// Throws DataError naming `source` for a file that is not a calibration or lacks a field.
Calibration calibration_from_json(const nlohmann::json& json, const std::string& source);

}  // namespace strata
