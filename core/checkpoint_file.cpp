#include "core/checkpoint_file.hpp"

#include <zlib.h>

#include <bit>
#include <span>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/atomic_file.hpp"
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

std::uint32_t tensor_crc32(std::span<const float> values) {
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(values.data()), values.size() * sizeof(float)));
}

void check_crc32(const std::string& path, const std::string& dataset, std::uint32_t actual,
                 std::uint32_t recorded) {
  if (actual != recorded)
    throw DataError(fmt::format(
        "{}: dataset {}: checksum mismatch (crc32 {:08x}, recorded {:08x}): the data is corrupt",
        path, dataset, actual, recorded));
}

std::uint32_t combined_crc32(std::span<const std::uint32_t> run_crcs, std::uint64_t run_bytes) {
  uLong crc = 0;  // the CRC-32 of no bytes
#if ZLIB_VERNUM >= 0x12c0
  // zlib 1.2.12 and later: the operator for one run length, computed once.
  const uLong op = crc32_combine_gen64(static_cast<z_off64_t>(run_bytes));
  for (const std::uint32_t run : run_crcs) crc = crc32_combine_op(crc, run, op);
#else
  for (const std::uint32_t run : run_crcs)
    crc = crc32_combine64(crc, run, static_cast<z_off64_t>(run_bytes));
#endif
  return static_cast<std::uint32_t>(crc);
}

namespace {

// Everything but the tensors' data: format, each tensor's crc32 (`crcs`, in key order), the
// scalars and their checksum.
void write_attributes(h5::File& file, const StateDict& state, std::span<const std::uint32_t> crcs) {
  file.write_attr_string("/", "format", checkpoint_format);
  file.write_attr_int("/", "format_version", checkpoint_format_version);
  std::size_t k = 0;
  for (const auto& entry : state.tensors())
    file.write_attr_int(fmt::format("/{}", entry.first), crc_attribute, crcs[k++]);
  for (const auto& [key, value] : state.scalars()) {
    const auto [owner, name] = owner_and_name(key);
    file.create_group(owner);
    if (const auto* i = std::get_if<std::int64_t>(&value)) file.write_attr_int(owner, name, *i);
    if (const auto* d = std::get_if<double>(&value)) file.write_attr_real(owner, name, *d);
    if (const auto* s = std::get_if<std::string>(&value)) file.write_attr_string(owner, name, *s);
  }
  file.write_attr_int("/", scalars_crc_attribute, scalars_crc32(state.scalars()));
}

}  // namespace

void write_checkpoint(const std::filesystem::path& path, const StateDict& state,
                      const std::function<void(std::size_t, std::size_t)>& progress) {
  for (const auto& [key, tensor] : state.tensors())
    if (tensor.shard.axis >= 0)
      throw std::invalid_argument(fmt::format("checkpoint: tensor {} is a slice, not whole", key));
  // The checksums are computed on a thread of their own while the data goes to disk.
  std::vector<std::uint32_t> crcs;
  std::thread checksums([&] {
    for (const auto& entry : state.tensors()) crcs.push_back(tensor_crc32(entry.second.values));
  });
  struct Joiner {
    std::thread& thread;
    ~Joiner() {
      if (thread.joinable()) thread.join();
    }
  } joiner{checksums};
  replace_atomically(path, [&](const std::filesystem::path& temporary) {
    h5::File::write_new(temporary.string(), [&](h5::File& file) {
      std::size_t done = 0;
      for (const auto& [key, tensor] : state.tensors()) {
        file.write_f32(fmt::format("/{}", key), tensor.local_shape, tensor.values.data());
        if (progress) progress(++done, state.tensors().size());
      }
      checksums.join();
      write_attributes(file, state, crcs);
    });
  });
}

std::vector<std::uint64_t> write_checkpoint_frame(const std::string& path, const StateDict& frame) {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> crcs;
  h5::File::write_new(path, [&](h5::File& file) {
    for (const auto& [key, tensor] : frame.tensors()) {
      if (tensor.shard.axis < 0) {
        file.write_f32(fmt::format("/{}", key), tensor.local_shape, tensor.values.data());
        crcs.push_back(tensor_crc32(tensor.values));
      } else {
        offsets.push_back(file.reserve_f32(fmt::format("/{}", key), tensor.shard.whole));
        crcs.push_back(0);
      }
    }
    write_attributes(file, frame, crcs);
  });
  return offsets;
}

void record_checkpoint_checksums(const std::string& path,
                                 const std::map<std::string, std::uint32_t>& crcs) {
  h5::File::change_unfinished(path, [&](h5::File& file) {
    for (const auto& [key, crc] : crcs)
      file.write_attr_int(fmt::format("/{}", key), crc_attribute, crc);
  });
}

namespace {

// read_checkpoint, and with `layout` read_checkpoint_slices.
StateDict read_checkpoint_parts(const std::string& path, const StateDict* layout,
                                std::map<std::string, std::uint32_t>* slice_crcs) {
  const auto file = h5::File::open_read(path);
  if (!file.has_attr("/", "format") || file.read_attr_string("/", "format") != checkpoint_format)
    throw DataError(fmt::format("{}: not a strata checkpoint (no format = {} attribute)", path,
                                checkpoint_format));
  const std::int64_t version = file.read_attr_int("/", "format_version");
  if (version != checkpoint_format_version)
    throw DataError(fmt::format("{}: checkpoint format version {}, this strata reads version {}",
                                path, version, checkpoint_format_version));
  StateDict state;
  std::vector<std::pair<std::string, std::uint32_t>> recorded_crcs;
  for (const auto& dataset : file.datasets()) {
    if (!file.has_attr(dataset, crc_attribute))
      throw DataError(
          fmt::format("{}: dataset {} has no {} attribute", path, dataset, crc_attribute));
    // Read straight into the state's own buffer: no second copy of a large model.
    const std::string key = dataset.substr(1);
    StateTensor& t = state.tensors()[key];
    t.local_shape = file.shape(dataset);
    t.shard = ShardSpec::whole_tensor(t.local_shape);
    if (layout != nullptr && layout->has_tensor(key) && layout->tensor(key).shard.axis >= 0) {
      const StateTensor& wanted = layout->tensor(key);
      if (wanted.shard.whole != t.local_shape)
        throw CheckpointMismatch(fmt::format("{}: dataset {} has shape [{}], this model's [{}]",
                                             path, dataset, fmt::join(t.local_shape, ", "),
                                             fmt::join(wanted.shard.whole, ", ")));
      const auto axis = static_cast<std::size_t>(wanted.shard.axis);
      file.read_f32_slice(dataset, axis, wanted.shard.offset, wanted.local_shape.at(axis),
                          t.values);
      t.local_shape = wanted.local_shape;
      t.shard = wanted.shard;
      // A slice's checksum cannot be checked without the whole tensor: the caller may.
      if (slice_crcs != nullptr)
        (*slice_crcs)[key] = static_cast<std::uint32_t>(file.read_attr_int(dataset, crc_attribute));
      continue;
    }
    file.read_f32(dataset, t.values);
    recorded_crcs.emplace_back(
        dataset, static_cast<std::uint32_t>(file.read_attr_int(dataset, crc_attribute)));
  }
  for (const auto& [dataset, expected] : recorded_crcs) {
    check_crc32(path, dataset, tensor_crc32(state.tensor(dataset.substr(1)).values), expected);
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

}  // namespace

StateDict read_checkpoint(const std::string& path) {
  return read_checkpoint_parts(path, nullptr, nullptr);
}

StateDict read_checkpoint_slices(const std::string& path, const StateDict& layout,
                                 std::map<std::string, std::uint32_t>* slice_crcs) {
  return read_checkpoint_parts(path, &layout, slice_crcs);
}

}  // namespace strata
