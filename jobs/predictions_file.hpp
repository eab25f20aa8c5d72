// A model's class probabilities for the validation and test sets, as the group that trained it
// writes them (predictions.h5), for whoever combines models afterwards.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace strata {

struct SetPredictions {
  std::vector<float> validation, test;  // rows x classes, row-major
  int classes = 0;
};

// Written under a temporary name and renamed (never half a file under the final name).
void write_predictions(const std::filesystem::path& path, const SetPredictions& predictions);
// Throws DataError naming the file when it is missing or damaged.
SetPredictions read_predictions(const std::string& path);

}  // namespace strata
