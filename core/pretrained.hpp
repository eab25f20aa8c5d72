// Weights a training starts from (transfer learning): a weights file or a checkpoint, matched to
// a model by parameter name, with the input normalisation they were trained with.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/model.hpp"
#include "core/training_data.hpp"

namespace strata {

struct PretrainedWeights {
  std::string path;
  std::map<std::string, Tensor> tensors;  // "<layer>/weight" -> the whole tensor
  std::optional<Normalisation> normalisation;
};

// Reads a weights file (/weights/<layer>/<weight|bias>) or a checkpoint (ckpt-*.h5, verified:
// its weights/ tensors). Throws DataError naming the file and the problem.
PretrainedWeights read_pretrained(const std::string& path);

// Copies the pretrained value of every parameter of `model` outside `fresh_layers` (a new head
// keeps its initialisation), a model-parallel shard its slice. Throws DataError listing by name
// every parameter the file lacks, every tensor of the file the model has no place for, and every
// shape that differs, when there is any.
void load_pretrained(const PretrainedWeights& weights, Model& model,
                     const std::set<std::string>& fresh_layers);

}  // namespace strata
