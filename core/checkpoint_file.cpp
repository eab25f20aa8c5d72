#include "core/checkpoint_file.hpp"

#include <zlib.h>

#include <bit>
#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/hdf5_file.hpp"

namespace strata {

namespace {

constexpr const char* crc_attribute = "crc32";
constexpr const char* scalars_crc_attribute = "scalars_crc32";

// Splits "a/b/k" into ("/a/b", "k"); a key without '/' belongs to the root.
std::pair<std::string, std::string> owner_and_name(const std::string& key) {
  const auto slash = key.rfind('/');
  if (slash == std::string::npos) return {"/", key};
  return {fmt::format("/{}", key.substr(0, slash)), key.substr(slash + 1)};
}

// A checksum over every scalar, in key order, with doubles by their bits: a flipped byte in an
// attribute is found like one in a tensor.
std::uint32_t scalars_crc32(const std::map<std::string, StateScalar>& scalars) {
  std::string text;
  for (const auto& [key, value] : scalars) {
    text += fmt::format("{}=", key);
    if (const auto* i = std::get_if<std::int64_t>(&value)) text += fmt::format("i:{}", *i);
    if (const auto* d = std::get_if<double>(&value))
      text += fmt::format("r:{:x}", std::bit_cast<std::uint64_t>(*d));
    if (const auto* s = std::get_if<std::string>(&value)) text += "s:" + *s;
    text += '\n';
  }
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(text.data()), text.size()));
}

bool reserved(const std::string& object, const std::string& name) {
  return object == "/" &&
         (name == "format" || name == "format_version" || name == scalars_crc_attribute);
}

}  // namespace

std::uint32_t tensor_crc32(const std::vector<float>& values) {
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(values.data()), values.size() * sizeof(float)));
}

std::vector<char> encode_checkpoint(const StateDict& state) {
  auto file = h5::File::create_in_memory("checkpoint");
  file.write_attr_string("/", "format", checkpoint_format);
  file.write_attr_int("/", "format_version", checkpoint_format_version);
  for (const auto& [key, tensor] : state.tensors()) {
    if (tensor.shard.axis >= 0)
      throw std::invalid_argument(fmt::format("checkpoint: tensor {} is a slice, not whole", key));
    const std::string path = fmt::format("/{}", key);
    file.write_f32(path, tensor.local_shape, tensor.values.data());
    file.write_attr_int(path, crc_attribute, tensor_crc32(tensor.values));
  }
  for (const auto& [key, value] : state.scalars()) {
    const auto [owner, name] = owner_and_name(key);
    file.create_group(owner);
    if (const auto* i = std::get_if<std::int64_t>(&value)) file.write_attr_int(owner, name, *i);
    if (const auto* d = std::get_if<double>(&value)) file.write_attr_real(owner, name, *d);
    if (const auto* s = std::get_if<std::string>(&value)) file.write_attr_string(owner, name, *s);
  }
  file.write_attr_int("/", scalars_crc_attribute, scalars_crc32(state.scalars()));
  return file.image();
}

StateDict read_checkpoint(const std::string& path) {
  const auto file = h5::File::open_read(path);
  if (!file.has_attr("/", "format") || file.read_attr_string("/", "format") != checkpoint_format)
    throw DataError(fmt::format("{}: not a strata checkpoint (no format = {} attribute)", path,
                                checkpoint_format));
  const std::int64_t version = file.read_attr_int("/", "format_version");
  if (version != checkpoint_format_version)
    throw DataError(fmt::format("{}: checkpoint format version {}, this strata reads version {}",
                                path, version, checkpoint_format_version));
  StateDict state;
  std::vector<float> values;
  for (const auto& dataset : file.datasets()) {
    if (!file.has_attr(dataset, crc_attribute))
      throw DataError(
          fmt::format("{}: dataset {} has no {} attribute", path, dataset, crc_attribute));
    const Shape shape = file.shape(dataset);
    file.read_f32(dataset, values);
    const auto expected = file.read_attr_int(dataset, crc_attribute);
    if (tensor_crc32(values) != static_cast<std::uint32_t>(expected))
      throw DataError(
          fmt::format("{}: dataset {}: checksum mismatch (crc32 {:08x}, recorded "
                      "{:08x}): the data is corrupt",
                      path, dataset, tensor_crc32(values), static_cast<std::uint32_t>(expected)));
    state.put_tensor(dataset.substr(1), values, shape, ShardSpec::whole_tensor(shape));
  }
  std::vector<std::string> owners = file.groups();
  owners.insert(owners.begin(), "/");
  for (const auto& owner : owners)
    for (const auto& [name, type] : file.attributes(owner)) {
      if (reserved(owner, name)) continue;
      const std::string key = owner == "/" ? name : fmt::format("{}/{}", owner.substr(1), name);
      if (type == H5T_INTEGER)
        state.put_int(key, file.read_attr_int(owner, name));
      else if (type == H5T_FLOAT)
        state.put_real(key, file.read_attr_real(owner, name));
      else if (type == H5T_STRING)
        state.put_text(key, file.read_attr_string(owner, name));
      else
        throw DataError(fmt::format("{}: attribute {} of {} has a type strata never writes", path,
                                    name, owner));
    }
  const auto recorded = file.read_attr_int("/", scalars_crc_attribute);
  if (scalars_crc32(state.scalars()) != static_cast<std::uint32_t>(recorded))
    throw DataError(
        fmt::format("{}: the checksum over its attributes does not match: the "
                    "metadata is corrupt",
                    path));
  return state;
}

}  // namespace strata
