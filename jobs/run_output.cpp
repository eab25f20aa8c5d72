#include "jobs/run_output.hpp"

#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"

namespace strata {

namespace fs = std::filesystem;

RunOutput::RunOutput(const fs::path& dir, bool fresh) : dir_(dir) {
  std::error_code ec;
  bool has_results = false;
  for (const char* mark : {"metrics.jsonl", "weights.h5", "members", "trials.csv"})
    has_results = has_results || fs::exists(dir_ / mark, ec);
  const bool has_checkpoints = fs::exists(checkpoints_dir(), ec);
  if (has_checkpoints && !fresh) {
    resuming_ = true;
    create_directory();
    return;
  }
  if (has_results && !fresh)
    throw ConfigError(
        fmt::format("output directory {} holds the results of a run but no checkpoints to resume "
                    "from; pass --fresh to start over (the earlier run is kept as "
                    "{}.previous-<n>) or choose another output.dir",
                    dir_.string(), dir_.string()));
  const bool has_run = has_results || has_checkpoints || fs::exists(dir_ / "plan.txt", ec);
  if (has_run && fresh) {
    for (int n = 1;; ++n) {
      fs::path aside = dir_.string() + fmt::format(".previous-{}", n);
      if (fs::exists(aside, ec)) continue;
      fs::rename(dir_, aside, ec);
      if (ec)
        throw DataError(fmt::format("cannot move {} aside to {}: {}", dir_.string(), aside.string(),
                                    ec.message()));
      moved_aside_ = aside;
      break;
    }
  }
  create_directory();
}

RunOutput RunOutput::inside_checked_run(const fs::path& dir) {
  RunOutput output(dir);
  output.create_directory();
  return output;
}

namespace {

// Why `dir` cannot be created: the nearest ancestor that exists is a file, or one the process may
// not write into.
std::string why_not_created(const fs::path& dir, const std::error_code& error) {
  std::error_code ec;
  fs::path existing = fs::absolute(dir, ec).parent_path();
  while (!existing.empty() && existing != existing.root_path() && !fs::exists(existing, ec))
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    return fmt::format("{} is a file, not a directory", existing.string());
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    return fmt::format("no permission to create entries in {} ({})", existing.string(),
                       std::generic_category().message(errno));
  return error.message();
}

}  // namespace

void RunOutput::create_directory() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw DataError(fmt::format("cannot create output directory {}: {}", dir_.string(),
                                why_not_created(dir_, ec)));
  // Found now rather than at the first checkpoint, hours into the run.
  if (::access(dir_.c_str(), W_OK | X_OK) != 0)
    throw DataError(fmt::format("output directory {} is not writable: {}", dir_.string(),
                                std::generic_category().message(errno)));
}

void RunOutput::write_text(const std::string& name, const std::string& text) const {
  write_text_atomically(dir_ / name, text);
}

void RunOutput::keep_metrics_before(int epoch) {
  keep_rows_before(metrics_path(), "epoch", epoch);
}

void keep_rows_before(const std::filesystem::path& path, const char* key, std::int64_t bound) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // the last line has no newline: cut short by a kill
    const auto row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.contains(key) || !row[key].is_number_integer() ||
        row[key].get<std::int64_t>() >= bound)
      break;
    kept += line + '\n';
  }
  in.close();
  write_text_atomically(path, kept);
}

void RunOutput::append_metrics(const EpochMetrics& m, const std::string& device) {
  // Opened on the first epoch, so a run that fails before training leaves no metrics.jsonl behind
  // and the next attempt needs no --fresh; a resumed run appends to the rows it kept.
  if (!metrics_.is_open()) {
    metrics_.open(metrics_path(), std::ios::out | std::ios::app);
    if (!metrics_) throw DataError(fmt::format("cannot write {}", metrics_path().string()));
  }
  const nlohmann::json line = {{"epoch", m.epoch},
                               {"train_loss", m.train_loss},
                               {"train_accuracy", m.train_accuracy},
                               {"val_loss", m.val_loss},
                               {"val_accuracy", m.val_accuracy},
                               {"test_loss", m.test_loss},
                               {"test_accuracy", m.test_accuracy},
                               {"samples_per_s", m.samples_per_s},
                               {"seconds", m.seconds},
                               {"lr", m.lr},
                               {"device", device}};
  metrics_ << line.dump() << '\n';
  metrics_.flush();
  if (!metrics_)
    throw DataError(fmt::format("cannot append to {} (disk full?)", metrics_path().string()));
}

}  // namespace strata
