#include "jobs/checkpoint_store.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/errors.hpp"
#include "jobs/fault_injection.hpp"
#include "parallel/checkpoint_shards.hpp"
#include "parallel/failure_agreement.hpp"

namespace strata {

namespace fs = std::filesystem;

std::int64_t checkpoint_sequence(const fs::path& file) {
  const std::string name = file.filename().string();
  if (!name.starts_with("ckpt-") || !name.ends_with(".h5") || name.size() <= 8) return -1;
  const std::string digits = name.substr(5, name.size() - 8);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

CheckpointStore::CheckpointStore(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  const auto present = list();
  if (!present.empty()) next_sequence_ = checkpoint_sequence(present.back()) + 1;
}

CheckpointStore::~CheckpointStore() {
  try {
    wait();
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata: checkpoint write failed: {}\n", e.what());
  }
}

std::vector<fs::path> CheckpointStore::list() const {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return files;
  for (const auto& entry : fs::directory_iterator(dir_, ec))
    if (checkpoint_sequence(entry.path()) >= 0) files.push_back(entry.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return checkpoint_sequence(a) < checkpoint_sequence(b);
  });
  return files;
}

std::optional<LoadedCheckpoint> CheckpointStore::load_newest(
    const std::function<void(const std::string&)>& skipped) const {
  return load_newest_of(
      list(), skipped, [](const fs::path& file) { return read_checkpoint(file.string()); }, true);
}

std::optional<LoadedCheckpoint> CheckpointStore::load_newest_of(
    const std::vector<fs::path>& files, const std::function<void(const std::string&)>& skipped,
    const std::function<StateDict(const fs::path&)>& read, bool rename_damaged) const {
  std::string reasons;
  std::vector<fs::path> damaged;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      LoadedCheckpoint loaded{*it, read(*it)};
      // Damaged files are renamed aside (kept for a look) once a valid one is found: they must not
      // count towards `keep`, or the next write would prune the last valid checkpoint.
      if (rename_damaged)
        for (const auto& file : damaged) {
          std::error_code ignored;
          fs::rename(file, file.string() + ".damaged", ignored);
        }
      return loaded;
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const DataError& e) {
      if (skipped) skipped(e.what());
      reasons += fmt::format("\n  {}", e.what());
      damaged.push_back(*it);
    }
  }
  if (files.empty()) return std::nullopt;
  throw DataError(
      fmt::format("{}: none of the {} checkpoints is valid; not starting over (move "
                  "the directory aside or pass --fresh):{}",
                  dir_.string(), files.size(), reasons));
}

void CheckpointStore::save(StateDict whole, std::function<void(StateDict&)> complete) {
  wait();
  const fs::path path = next_path();
  const bool killed = ++writes_ == FaultPlan::from_environment().kill_in_write;
  written_ = std::move(whole);
  writer_ = std::thread([this, path, killed, complete = std::move(complete)] {
    try {
      if (complete) {
        const TraceSpan span(trace_, "checkpoint copy from the device", "io");
        complete(written_);
      }
      const TraceSpan span(trace_, "checkpoint write", "io");
      write_checkpoint(path, written_, [&](std::size_t done, std::size_t total) {
        // A crash in the middle of the write: half the tensors in the temporary file.
        if (killed && done == total / 2) std::raise(SIGKILL);
      });
      prune();
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void CheckpointStore::save_shards(const StateDict& local, const Communicator& model) {
  finish_shards();
  shard_root_ = model.rank() == 0;
  std::string path;
  agree_on_failure(model, [&] {
    if (shard_root_) path = next_path().string();
  });
  model.broadcast_string(path, 0);
  const bool killed = shard_root_ && ++writes_ == FaultPlan::from_environment().kill_in_write;
  shard_write_.emplace(
      path, local, model,
      [killed](std::size_t done, std::size_t total) {
        // A crash in the middle of the write: half the slices in the temporary file.
        if (killed && done == (total + 1) / 2) std::raise(SIGKILL);
      },
      trace_);
}

void CheckpointStore::finish_shards() {
  if (!shard_write_) return;
  try {
    shard_write_->finish();
  } catch (...) {
    shard_write_.reset();
    throw;
  }
  shard_write_.reset();
  if (shard_root_) prune();
}

fs::path CheckpointStore::next_path() {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw DataError(
        fmt::format("cannot create checkpoint directory {}: {}", dir_.string(), ec.message()));
  return dir_ / fmt::format("ckpt-{:08}.h5", next_sequence_++);
}

void CheckpointStore::prune() const {
  const auto files = list();
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep_) < files.size(); ++i) {
    std::error_code ignored;
    fs::remove(files[i], ignored);
  }
}

void CheckpointStore::wait() {
  if (writer_.joinable()) writer_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace strata
