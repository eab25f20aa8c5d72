// A checkpoint on disk: one HDF5 file of whole tensors and scalar attributes, a CRC-32 on every
// tensor and one over the scalars, and a format version (docs/architecture.md, "Checkpoint
// layout").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
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

// The file of a checkpoint whose sliced tensors its model-parallel shards write themselves
// (parallel/checkpoint_shards.hpp): `frame` holds whole tensors, written here with their
// checksums, and slices (ShardSpec::axis >= 0), whose datasets are created whole and left
// unwritten, their checksums 0 until record_checkpoint_checksums. Writes `path` itself (the caller
// syncs and renames it) and returns the byte offset of each slice's dataset in the file, in key
// order.
std::vector<std::uint64_t> write_checkpoint_frame(const std::string& path, const StateDict& frame);
// Records in the frame at `path` the checksums of its slices' whole tensors, once their data is
// written (by key, "weights/dense_1/weight"). A failure (a full disk) throws DataError.
void record_checkpoint_checksums(const std::string& path,
                                 const std::map<std::string, std::uint32_t>& crcs);

// Reads a checkpoint written by write_checkpoint and verifies its format, version and every
// checksum. Throws DataError naming the file and what is wrong.
StateDict read_checkpoint(const std::string& path);

// The same, but each tensor that `layout` holds as a slice (ShardSpec::axis >= 0) is read as that
// slice only (a model-parallel shard's part; the file's tensors are whole), so that no rank needs
// memory for the whole state. A slice's checksum covers the whole tensor, so it is not checked
// here: its recorded value goes into `slice_crcs` (by key), for read_checkpoint_shards to check
// from every shard's slice.
StateDict read_checkpoint_slices(const std::string& path, const StateDict& layout,
                                 std::map<std::string, std::uint32_t>* slice_crcs = nullptr);

// CRC-32 (zlib's) of the tensor's bytes, as stored in its crc32 attribute.
std::uint32_t tensor_crc32(std::span<const float> values);
// Throws DataError naming the file and the dataset ("/weights/dense_1/weight") when a tensor's
// CRC-32 differs from the one its file recorded.
void check_crc32(const std::string& path, const std::string& dataset, std::uint32_t actual,
                 std::uint32_t recorded);
// The CRC-32 of consecutive runs of `run_bytes` bytes each, from each run's CRC-32 (zlib's
// crc32_combine): a tensor's checksum from its shards' interleaved slices, never gathered whole.
std::uint32_t combined_crc32(std::span<const std::uint32_t> run_crcs, std::uint64_t run_bytes);

}  // namespace strata
