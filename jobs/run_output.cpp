#include "jobs/run_output.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"

namespace strata {

namespace fs = std::filesystem;

RunOutput::RunOutput(const fs::path& dir, bool fresh) : dir_(dir) {
  std::error_code ec;
  bool has_run = false;
  for (const char* mark : {"metrics.jsonl", "weights.h5", "plan.txt", "members"})
    has_run = has_run || fs::exists(dir_ / mark, ec);
  if (has_run && !fresh)
    throw ConfigError(
        fmt::format("output directory {} already holds a run; pass --fresh to start over "
                    "(the earlier run is kept as {}.previous-<n>) or choose another output.dir",
                    dir_.string(), dir_.string()));
  if (has_run) {
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

void RunOutput::create_directory() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw DataError(
        fmt::format("cannot create output directory {}: {}", dir_.string(), ec.message()));
}

void RunOutput::write_text(const std::string& name, const std::string& text) const {
  std::ofstream file(dir_ / name, std::ios::out | std::ios::trunc);
  file << text;
  if (!file) throw DataError(fmt::format("cannot write {}", (dir_ / name).string()));
}

void RunOutput::append_metrics(const EpochMetrics& m) {
  // Opened on the first epoch, so a run that fails before training leaves no metrics.jsonl behind
  // and the next attempt needs no --fresh.
  if (!metrics_.is_open()) {
    metrics_.open(metrics_path(), std::ios::out | std::ios::trunc);
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
                               {"lr", m.lr}};
  metrics_ << line.dump() << '\n';
  metrics_.flush();
}

}  // namespace strata
