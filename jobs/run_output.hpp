// The files a run writes into output_dir: the directory itself, metrics.jsonl and the final
// weights.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "core/trainer.hpp"

namespace strata {

class RunOutput {
 public:
  // Creates `dir`. When it holds checkpoints, the run resumes from them (resuming() is true).
  // When it holds results without checkpoints (metrics.jsonl, weights.h5, members/, trials.csv),
  // refuses (ConfigError) unless `fresh`; a directory with only plan.txt (a run that failed before
  // its first step) does not count. With `fresh` an earlier run is moved aside to
  // "<dir>.previous-<n>", never deleted.
  RunOutput(const std::filesystem::path& dir, bool fresh);
  // A directory inside a run that was already checked (a member's own directory): created, not
  // checked.
  static RunOutput inside_checked_run(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  bool resuming() const { return resuming_; }
  std::filesystem::path checkpoints_dir() const { return dir_ / "checkpoints"; }
  std::filesystem::path weights_path() const { return dir_ / "weights.h5"; }
  std::filesystem::path metrics_path() const { return dir_ / "metrics.jsonl"; }
  // Keeps the rows of metrics.jsonl of epochs before `epoch` (a resumed training's first) and
  // drops the rest, including a line cut short by a kill, so that a resumed run neither repeats
  // nor loses a row. Appends go after them.
  void keep_metrics_before(int epoch);
  // Appends one JSON line and flushes it, so a killed job keeps every finished epoch.
  // `device`: where the epoch's passes ran (Trainer::device()), kept in each row as provenance.
  void append_metrics(const EpochMetrics& m, const std::string& device);
  // Writes (replaces) a small text file in the directory, such as plan.txt, atomically.
  void write_text(const std::string& name, const std::string& text) const;
  // Where an earlier run was moved, empty if none.
  const std::filesystem::path& moved_aside() const { return moved_aside_; }

 private:
  explicit RunOutput(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void create_directory() const;

  std::filesystem::path dir_;
  std::filesystem::path moved_aside_;
  bool resuming_ = false;
  std::ofstream metrics_;
};

// Keeps the rows of the JSON-lines file at `path` before the first whose `key` is `bound` or more,
// or that does not parse (a line cut short by a kill), and rewrites it atomically; nothing when
// there is no file. What a resumed training does to the rows it will write again.
void keep_rows_before(const std::filesystem::path& path, const char* key, std::int64_t bound);

}  // namespace strata
