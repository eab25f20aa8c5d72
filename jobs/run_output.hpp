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
  // Creates `dir`. When it already holds a run (metrics.jsonl, weights.h5, plan.txt or members/),
  // refuses (ConfigError) unless `fresh`, in which case the earlier run is moved aside to
  // "<dir>.previous-<n>", never deleted.
  RunOutput(const std::filesystem::path& dir, bool fresh);
  // A directory inside a run that was already checked (a member's own directory): created, not
  // checked.
  static RunOutput inside_checked_run(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path weights_path() const { return dir_ / "weights.h5"; }
  std::filesystem::path metrics_path() const { return dir_ / "metrics.jsonl"; }
  // Appends one JSON line and flushes it, so a killed job keeps every finished epoch.
  void append_metrics(const EpochMetrics& m);
  // Writes (replaces) a small text file in the directory, such as plan.txt.
  void write_text(const std::string& name, const std::string& text) const;
  // Where an earlier run was moved, empty if none.
  const std::filesystem::path& moved_aside() const { return moved_aside_; }

 private:
  explicit RunOutput(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void create_directory() const;

  std::filesystem::path dir_;
  std::filesystem::path moved_aside_;
  std::ofstream metrics_;
};

}  // namespace strata
