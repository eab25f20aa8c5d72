#include "core/pretrained.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/checkpoint_file.hpp"
#include "core/errors.hpp"
#include "core/hdf5_file.hpp"
#include "core/weights_io.hpp"

namespace strata {

namespace {

// "dense_1/weight" -> "dense_1".
std::string layer_of(const std::string& param) {
  return param.substr(0, param.rfind('/'));
}

}  // namespace

PretrainedWeights read_pretrained(const std::string& path) {
  PretrainedWeights out;
  out.path = path;
  const bool checkpoint = [&] {
    const auto file = h5::File::open_read(path);
    return file.has_attr("/", "format") &&
           file.read_attr_string("/", "format") == checkpoint_format;
  }();
  if (checkpoint) {
    const StateDict state = read_checkpoint(path);
    for (const auto& [key, tensor] : state.tensors()) {
      if (!key.starts_with("weights/")) continue;
      Tensor whole(tensor.shard.whole);
      state.read_tensor(key, whole);
      out.tensors.emplace(key.substr(8), std::move(whole));
    }
  } else {
    const auto file = h5::File::open_read(path);
    std::vector<float> values;
    for (const auto& dataset : file.datasets()) {
      if (!dataset.starts_with("/weights/")) continue;
      file.read_f32(dataset, values);
      out.tensors.emplace(dataset.substr(9), Tensor(file.shape(dataset), values));
    }
  }
  if (out.tensors.empty())
    throw DataError(
        fmt::format("{}: no weights in it (a weights file holds /weights/<layer>/weight "
                    "and .../bias; a checkpoint, weights/...)",
                    path));
  out.normalisation = read_normalisation(path);
  return out;
}

void load_pretrained(const PretrainedWeights& weights, Model& model,
                     const std::set<std::string>& fresh_layers) {
  std::vector<std::string> missing, extra, shapes;
  std::set<std::string> used;
  const auto params = model.params();
  for (const Param& p : params) {
    if (fresh_layers.contains(layer_of(p.name))) continue;
    const auto found = weights.tensors.find(p.name);
    if (found == weights.tensors.end()) {
      missing.push_back(p.name);
      continue;
    }
    used.insert(p.name);
    const Shape& whole = shard_of(p).whole;
    if (found->second.shape() != whole)
      shapes.push_back(fmt::format("{} (file {}, model {})", p.name,
                                   shape_string(found->second.shape()), shape_string(whole)));
  }
  for (const auto& [name, tensor] : weights.tensors)
    if (!used.contains(name) && !fresh_layers.contains(layer_of(name))) extra.push_back(name);
  if (!missing.empty() || !extra.empty() || !shapes.empty()) {
    std::string problems;
    if (!missing.empty())
      problems += fmt::format("; missing from the file: {}", fmt::join(missing, ", "));
    if (!shapes.empty()) problems += fmt::format("; other shape: {}", fmt::join(shapes, ", "));
    if (!extra.empty())
      problems += fmt::format("; in the file but not in the model: {}", fmt::join(extra, ", "));
    throw DataError(fmt::format(
        "{}: the pretrained weights do not fit the model{} (a new head's layers can be listed "
        "under head: to start fresh)",
        weights.path, problems));
  }
  StateDict whole_tensors;
  for (const auto& [name, tensor] : weights.tensors)
    if (used.contains(name)) whole_tensors.put_tensor(name, tensor);
  for (const Param& p : params)
    if (used.contains(p.name))
      whole_tensors.read_tensor(p.name, p.value->values(), p.value->shape(), shard_of(p));
}

}  // namespace strata
