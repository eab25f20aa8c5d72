#include "core/weights_io.hpp"

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

void save_weights(const std::string& path,
                  const std::vector<std::pair<std::string, Tensor>>& named) {
  // Written under a temporary name and renamed into place, so that a full disk never leaves half a
  // file under the final name.
  replace_atomically(path, [&](const std::filesystem::path& temporary) {
    h5::File::write_new(temporary.string(), [&](h5::File& file) {
      file.write_attr_string("/", "format", "strata-weights");
      file.write_attr_int("/", "format_version", 1);
      for (const auto& [name, tensor] : named)
        file.write_f32(dataset_name(name), tensor.shape(), tensor.data());
    });
  });
}

void save_weights(const std::string& path, Model& model) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (const auto& p : model.params()) named.emplace_back(p.name, *p.value);
  save_weights(path, named);
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
