// Model weights as HDF5: /weights/<layer>/weight and /weights/<layer>/bias (docs/architecture.md,
// "HDF5 layouts").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model.hpp"
#include "core/training_data.hpp"

namespace strata {

// Writes every parameter as float32 with its logical shape, plus root attributes
// format = "strata-weights" and format_version = 1, and, when given, the input normalisation the
// model was trained with (input_mean, input_stddev), so that whoever uses the weights feeds them
// the same inputs.
void save_weights(const std::string& path, Model& model,
                  const Normalisation* normalisation = nullptr);
// The same layout from tensors named "<layer>/weight" and "<layer>/bias" (a model-parallel model's
// parameters assembled whole).
void save_weights(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& named,
                  const Normalisation* normalisation = nullptr);

// The input normalisation a weights file or checkpoint records; nullopt when it has none (a file
// written by another tool).
std::optional<Normalisation> read_normalisation(const std::string& path);

// Reads every parameter the model has; extra datasets in the file are ignored, so a file
// written by another tool (h5py) needs only the model's names. Throws DataError naming the
// file and the dataset when one is missing or has the wrong shape.
void load_weights(const std::string& path, Model& model);

}  // namespace strata
