// A checkpoint on disk: one HDF5 file of whole tensors and scalar attributes, a CRC-32 on every
// tensor and one over the scalars, and a format version (docs/architecture.md, "Checkpoint
// layout").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/state.hpp"

namespace strata {

inline constexpr const char* checkpoint_format = "strata-checkpoint";
inline constexpr std::int64_t checkpoint_format_version = 1;

// Writes `state` as an HDF5 file at `path`: tensor "a/b/c" as float32 dataset /a/b/c with
// attribute crc32, scalar "a/b/k" as attribute k of group /a/b. Every tensor must be whole. The
// file is written under a temporary name, synced and renamed (replace_atomically); a failure
// (a full disk) throws DataError and leaves nothing under `path`. Safe on a background thread:
// each call into HDF5 takes the library lock. `progress(done, total)` follows each tensor.
void write_checkpoint(const std::filesystem::path& path, const StateDict& state,
                      const std::function<void(std::size_t, std::size_t)>& progress = {});

// Reads a checkpoint written by write_checkpoint and verifies its format, version and every
// checksum. Throws DataError naming the file and what is wrong.
StateDict read_checkpoint(const std::string& path);

// The same, but each tensor that `layout` holds as a slice (ShardSpec::axis >= 0) is read as that
// slice only (a model-parallel shard's part; the file's tensors are whole): no rank but one needs
// memory for the whole state. A slice's checksum is not checked (it covers the whole tensor):
// read the file whole once (read_checkpoint) to verify it.
StateDict read_checkpoint_slices(const std::string& path, const StateDict& layout);

// CRC-32 (zlib's) of the tensor's bytes, as stored in its crc32 attribute.
std::uint32_t tensor_crc32(const std::vector<float>& values);

}  // namespace strata
