#include "parallel/checkpoint_shards.hpp"

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/checkpoint_file.hpp"
#include "core/errors.hpp"
#include "parallel/failure_agreement.hpp"

namespace strata {

namespace {

// The file holds little-endian floats, which the shards write as they are in memory.
static_assert(std::endian::native == std::endian::little);

template <typename T>
std::string as_bytes(const std::vector<T>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)};
}

template <typename T>
std::vector<T> from_bytes(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// This shard's slices of `state`, in key order.
std::vector<ShardSlice> slices_of(const StateDict& state, const Communicator& model) {
  std::vector<ShardSlice> slices;
  for (const auto& [key, t] : state.tensors())
    if (t.shard.axis >= 0) slices.push_back({&key, &t, slice_layout(key, t, model)});
  return slices;
}

// Run `o` of a slice: its values in block `o` of the whole tensor.
std::span<const float> run_values(const ShardSlice& s, std::int64_t o) {
  const auto run = static_cast<std::size_t>(s.layout.extent * s.layout.inner);
  return std::span(s.tensor->values).subspan(static_cast<std::size_t>(o) * run, run);
}

// The checksums of one slice's runs, in order.
void add_run_checksums(const ShardSlice& s, std::vector<std::uint32_t>& crcs) {
  for (std::int64_t o = 0; o < s.layout.outer; ++o) crcs.push_back(tensor_crc32(run_values(s, o)));
}

// Every shard's run checksums (`[m]`: shard m's `mine`): a whole tensor's runs lie block by block,
// each block holding the shards' runs in shard order.
std::vector<std::vector<std::uint32_t>> gather_run_checksums(const std::vector<std::uint32_t>& mine,
                                                             const Communicator& model) {
  std::vector<std::vector<std::uint32_t>> all;
  for (const std::string& bytes : model.allgather_strings(as_bytes(mine)))
    all.push_back(from_bytes<std::uint32_t>(bytes));
  return all;
}

// Each slice's whole-tensor checksum, in key order, from every shard's run checksums.
std::vector<std::uint32_t> slice_checksums(const std::vector<ShardSlice>& slices,
                                           const std::vector<std::vector<std::uint32_t>>& runs) {
  std::vector<std::uint32_t> crcs;
  crcs.reserve(slices.size());
  std::size_t at = 0;  // the slice's first run in every shard's list
  for (const ShardSlice& s : slices) {
    const SliceLayout& l = s.layout;
    std::vector<std::uint32_t> ordered;
    ordered.reserve(static_cast<std::size_t>(l.outer) * runs.size());
    for (std::int64_t o = 0; o < l.outer; ++o)
      for (const auto& shard : runs) ordered.push_back(shard.at(at + static_cast<std::size_t>(o)));
    at += static_cast<std::size_t>(l.outer);
    crcs.push_back(combined_crc32(ordered, static_cast<std::uint64_t>(l.extent * l.inner) * 4));
  }
  return crcs;
}

}  // namespace

SliceLayout slice_layout(const std::string& key, const StateTensor& t, const Communicator& model) {
  const auto axis = static_cast<std::size_t>(t.shard.axis);
  SliceLayout l{t.local_shape.at(axis), t.shard.whole.at(axis)};
  if (l.extent * model.size() != l.full || t.shard.offset != l.extent * model.rank())
    throw std::invalid_argument(fmt::format("{} is slice [{}, {}) of {} on shard {} of {}", key,
                                            t.shard.offset, t.shard.offset + l.extent, l.full,
                                            model.rank(), model.size()));
  for (std::size_t i = 0; i < axis; ++i) l.outer *= t.shard.whole[i];
  for (std::size_t i = axis + 1; i < t.shard.whole.size(); ++i) l.inner *= t.shard.whole[i];
  return l;
}

ShardedCheckpointWrite::ShardedCheckpointWrite(
    std::filesystem::path path, const StateDict& local, const Communicator& model,
    std::function<void(std::size_t, std::size_t)> progress, Trace* trace)
    : path_(std::move(path)), temporary_(path_.string() + ".tmp"), model_(model) {
  const bool root = model.rank() == 0;
  // Shard 0: the file with every dataset, its own whole tensors and the attributes. (A slice of
  // the wrong size fails on its shard alone: the agreement tells the others.)
  std::string offsets;
  agree_on_failure(model, [&] {
    slices_ = slices_of(local, model);
    if (!root) return;
    try {
      offsets = as_bytes(write_checkpoint_frame(temporary_.string(), local));
    } catch (...) {
      ::unlink(temporary_.c_str());
      throw;
    }
  });
  model.broadcast_string(offsets, 0);

  // Every shard: its slices, run by run, at their places in the whole tensors' data, and each
  // run's checksum, on a thread of its own while training goes on (run_checksums_ in the order
  // add_run_checksums gives them).
  writer_ = std::thread([this, progress = std::move(progress),
                         offset = from_bytes<std::uint64_t>(offsets), rank = model.rank(), trace] {
    const TraceSpan span(trace, "checkpoint write", "io");
    try {
      FileParts file(temporary_);
      for (std::size_t k = 0; k < slices_.size(); ++k) {
        const SliceLayout& l = slices_[k].layout;
        for (std::int64_t o = 0; o < l.outer; ++o) {
          const auto first = (o * l.full + rank * l.extent) * l.inner;
          const std::span<const float> run = run_values(slices_[k], o);
          file.write_at(offset.at(k) + static_cast<std::uint64_t>(first) * sizeof(float),
                        std::as_bytes(run));
          // Checksummed right after the write has read it, while it may still be in cache.
          run_checksums_.push_back(tensor_crc32(run));
        }
        if (progress) progress(k + 1, slices_.size());
      }
      file.sync_and_close();
    } catch (...) {
      error_ = std::current_exception();
    }
    written_ = true;
  });
}

ShardedCheckpointWrite::~ShardedCheckpointWrite() {
  if (writer_.joinable()) writer_.join();
}

void ShardedCheckpointWrite::finish() {
  if (writer_.joinable()) writer_.join();
  const bool root = model_.rank() == 0;
  try {
    agree_on_failure(model_, [&] {
      if (error_) std::rethrow_exception(error_);
    });
    // Every shard has written its slices: shard 0 records their checksums.
    const auto runs = gather_run_checksums(run_checksums_, model_);
    agree_on_failure(model_, [&] {
      if (!root || slices_.empty()) return;
      const std::vector<std::uint32_t> crcs = slice_checksums(slices_, runs);
      std::map<std::string, std::uint32_t> by_key;
      for (std::size_t k = 0; k < slices_.size(); ++k) by_key[*slices_[k].key] = crcs[k];
      record_checkpoint_checksums(temporary_.string(), by_key);
    });
  } catch (...) {
    if (root) ::unlink(temporary_.c_str());  // every shard has stopped writing to it
    throw;
  }
  agree_on_failure(model_, [&] {
    if (root) commit_atomically(temporary_, path_);
  });
}

void write_checkpoint_shards(const std::filesystem::path& path, const StateDict& local,
                             const Communicator& model,
                             const std::function<void(std::size_t, std::size_t)>& progress) {
  ShardedCheckpointWrite(path, local, model, progress).finish();
}

StateDict read_checkpoint_shards(const std::string& path, const StateDict& layout,
                                 const Communicator& model) {
  StateDict state;
  std::map<std::string, std::uint32_t> recorded;
  std::vector<ShardSlice> slices;
  std::vector<std::uint32_t> mine;
  agree_on_failure(model, [&] {
    state = read_checkpoint_slices(path, layout, &recorded);
    slices = slices_of(state, model);
    for (const ShardSlice& s : slices) add_run_checksums(s, mine);
  });
  // Every shard read the same file: shard 0 checks the slices' checksums for all of them.
  const auto runs = gather_run_checksums(mine, model);
  agree_on_failure(model, [&] {
    if (model.rank() != 0) return;
    const std::vector<std::uint32_t> actual = slice_checksums(slices, runs);
    for (std::size_t k = 0; k < slices.size(); ++k)
      check_crc32(path, "/" + *slices[k].key, actual[k], recorded.at(*slices[k].key));
  });
  return state;
}

}  // namespace strata
