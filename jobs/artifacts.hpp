// The named results stages hand on to later stages ("hpo.best", "hpo.top_k", "train.model"):
// JSON values whose file paths are relative to output.dir, kept in artifacts.json and in the run's
// checkpoint.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/state.hpp"
#include "parallel/communicator.hpp"

namespace strata {

class Artifacts {
 public:
  void publish(const std::string& name, nlohmann::json value) { items_[name] = std::move(value); }
  bool has(const std::string& name) const { return items_.contains(name); }
  // DataError naming the artifact and those that exist when there is none of that name.
  const nlohmann::json& get(const std::string& name) const;
  const std::map<std::string, nlohmann::json>& items() const { return items_; }

  // One line per artifact: its name and the files it names (config, weights, report), for the
  // end of a run.
  std::string summary() const;

  void save_state(StateDict& out, const std::string& prefix) const;
  void load_state(const StateDict& in, const std::string& prefix);
  // output.dir/artifacts.json, written atomically.
  void write(const std::filesystem::path& file) const;
  // Root's artifacts replace every other rank's. Collective over `world`.
  void share(const Communicator& world, int root);

 private:
  std::map<std::string, nlohmann::json> items_;
};

}  // namespace strata
