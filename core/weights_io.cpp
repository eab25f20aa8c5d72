#include "core/weights_io.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/hdf5_file.hpp"

namespace strata {

namespace {
std::string dataset_name(const std::string& param) {
  return "/weights/" + param;
}
}  // namespace

void save_weights(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& named,
                  const Normalisation* normalisation) {
  // Written under a temporary name and renamed into place, so that a full disk never leaves half a
  // file under the final name.
  replace_atomically(path, [&](const std::filesystem::path& temporary) {
    h5::File::write_new(temporary.string(), [&](h5::File& file) {
      file.write_attr_string("/", "format", "strata-weights");
      file.write_attr_int("/", "format_version", 1);
      if (normalisation != nullptr) {
        file.write_attr_real("/", "input_mean", normalisation->mean);
        file.write_attr_real("/", "input_stddev", normalisation->stddev);
      }
      for (const auto& [name, tensor] : named)
        file.write_f32(dataset_name(name), tensor.shape(), tensor.data());
    });
  });
}

void save_weights(const std::string& path, Model& model, const Normalisation* normalisation) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const auto& p : model.params()) named.emplace_back(p.name, *p.value);
  save_weights(path, named, normalisation);
}

std::optional<Normalisation> read_normalisation(const std::string& path) {
  const auto file = h5::File::open_read(path);
  // A weights file keeps it at the root, a checkpoint with the trainer's state.
  for (const char* object : {"/", "/trainer"})
    if ((std::string_view(object) == "/" || file.exists(object)) &&
        file.has_attr(object, "input_mean") && file.has_attr(object, "input_stddev")) {
      const Normalisation n{static_cast<float>(file.read_attr_real(object, "input_mean")),
                            static_cast<float>(file.read_attr_real(object, "input_stddev"))};
      if (!(n.stddev > 0.0f) || !std::isfinite(n.mean))
        throw DataError(fmt::format("{}: input_mean {} / input_stddev {} is no normalisation", path,
                                    n.mean, n.stddev));
      return n;
    }
  return std::nullopt;
}

void load_weights(const std::string& path, Model& model) {
  const auto file = h5::File::open_read(path);
  std::vector<float> values;
  for (const auto& p : model.params()) {
    const auto name = dataset_name(p.name);
    if (!file.exists(name))
      throw DataError(fmt::format(
          "{}: dataset {} not found (the model's layer names must match the file)", path, name));
    const auto shape = file.shape(name);
    if (shape != p.value->shape())
      throw DataError(fmt::format("{}: dataset {} has shape {} but the model needs {}", path, name,
                                  shape_string(shape), shape_string(p.value->shape())));
    file.read_f32(name, values);
    std::copy(values.begin(), values.end(), p.value->values().begin());
  }
}

}  // namespace strata
