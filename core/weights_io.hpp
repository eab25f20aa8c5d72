// Model weights as HDF5: /weights/<layer>/weight and /weights/<layer>/bias (README "HDF5 layouts").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/model.hpp"

namespace strata {

// Writes every parameter as float32 with its logical shape, plus root attributes
// format = "strata-weights" and format_version = 1.
void save_weights(const std::string& path, Model& model);
// The same layout from tensors named "<layer>/weight" and "<layer>/bias" (a model-parallel model's
// parameters assembled whole).
void save_weights(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& named);

// Reads every parameter the model has; extra datasets in the file are ignored, so a file
// written by another tool (h5py) needs only the model's names. Throws DataError naming the
// file and the dataset when one is missing or has the wrong shape.
void load_weights(const std::string& path, Model& model);

}  // namespace strata
