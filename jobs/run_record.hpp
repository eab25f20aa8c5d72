// run.json in a run's output.dir: what ran (the config as given, as resolved and with every
// default, the build and libraries) and, for each allocation of the run, its plans, hosts, kernels,
// the environment variables that change results, and how it ended.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// The config as the run uses it, every default filled in (JSON, keyed as the YAML is).
nlohmann::json effective_config(const Config& config);

class RunRecord {
 public:
  // Collective over `world` (it gathers the host names). World rank 0 writes `path` (empty on the
  // other ranks) with this allocation's entry started and not ended, after the entries of the
  // allocations an earlier run.json recorded.
  RunRecord(const Config& config, const Communicator& world, std::filesystem::path path,
            const std::string& plans);
  // World rank 0 completes this allocation's entry: end time, exit status and, for an error, its
  // message. An entry without an end means the job was killed, or ended by an error on another
  // rank (the job's output has its message). Never throws: it runs on the way out of errors.
  void finish(int exit_status, const std::string& message) noexcept;

 private:
  void write() const;

  std::filesystem::path path_;
  nlohmann::json record_;
};

}  // namespace strata
