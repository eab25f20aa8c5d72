// A checkpoint on disk: one HDF5 file of whole tensors and scalar attributes, a CRC-32 on every
// tensor and one over the scalars, and a format version (README "Checkpoint layout").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/state.hpp"

namespace strata {

inline constexpr const char* checkpoint_format = "strata-checkpoint";
inline constexpr std::int64_t checkpoint_format_version = 1;

// The bytes of an HDF5 file holding `state`: tensor "a/b/c" as float32 dataset /a/b/c with
// attribute crc32, scalar "a/b/k" as attribute k of group /a/b. Every tensor must be whole.
std::vector<char> encode_checkpoint(const StateDict& state);

// Reads a checkpoint written by encode_checkpoint (through write_file_atomically) and verifies
// its format, version and every checksum. Throws DataError naming the file and what is wrong.
StateDict read_checkpoint(const std::string& path);

// CRC-32 (zlib's) of the tensor's bytes, as stored in its crc32 attribute.
std::uint32_t tensor_crc32(const std::vector<float>& values);

}  // namespace strata
