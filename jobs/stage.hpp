// A stage of `strata run` behind one interface: its plan, what it reads from earlier stages and
// publishes for later ones, and running it (resuming where an earlier allocation stopped it; its
// state lives in its trainings' checkpoints and its journal).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "jobs/artifacts.hpp"
#include "jobs/stage_context.hpp"
#include "parallel/planner.hpp"

namespace strata {

class Stage {
 public:
  virtual ~Stage() = default;
  // The prefix of its artifacts: the stage kind ("train", "hpo"), with the stage's position among
  // those of its kind when there are several ("train2").
  const std::string& name() const { return name_; }
  // Where its files go, under the run's output.dir: the directory itself for the first stage of a
  // kind (""), a subdirectory named after the stage for the next ones.
  std::string subdirectory() const { return first_of_kind_ ? "" : name_; }
  // The run's config as this stage runs it: its own parallel block in place of the run's.
  Config config(const Config& run) const { return stage_config(run, spec_); }
  // Its decomposition of the world (planned for its config; every rank computes the same).
  Plan plan(const Config& run, int world_size, int ranks_per_node) const;
  // The artifacts it will publish, known before anything runs.
  virtual std::vector<std::string> publishes() const = 0;
  // The artifacts of earlier stages it reads, where the config names them, and the kinds of
  // artifact (".best", ".top_k", ".model") each may be.
  struct Read {
    ArtifactRef ref;
    std::vector<std::string> kinds;
    std::string purpose;  // "an ensemble's members come from"
  };
  virtual std::vector<Read> reads() const { return {}; }
  // What it can find wrong in the run's config before anything runs, reading no file but those
  // the config names: a ConfigError at the place, alike on every rank. `key`: the stage's key path
  // ("stages[2].transfer"), which its messages name. By default nothing.
  virtual void check(const Config& /*run*/, const std::string& /*key*/) const {}
  // The most trainings it can keep busy at once, where that is fewer than any number of member
  // groups (a generation's population, an ensemble's members); nullopt: no such limit.
  virtual std::optional<int> concurrent_trainings(const Config& /*run*/) const {
    return std::nullopt;
  }
  // What a user would not expect from `plan` for this stage, as lines: member groups it leaves
  // idle (by default, from concurrent_trainings), or extra ranks that became independent
  // trainings. `members`: a train stage's members when an earlier allocation fixed them (0: as
  // many as groups). Empty when nothing.
  virtual std::string layout_note(const Config& run, const Plan& plan, int members = 0) const;
  // Collective over the world. Throws Interrupted after checkpointing on a stop signal. On world
  // rank 0 it publishes its artifacts into `artifacts` (which holds, on every rank, what earlier
  // stages published).
  virtual void run(const StageContext& context, Artifacts& artifacts) = 0;

 protected:
  Stage(std::string name, bool first_of_kind, const StageSpec& spec)
      : name_(std::move(name)), first_of_kind_(first_of_kind), spec_(spec) {}
  const StageSpec& spec() const { return spec_; }

 private:
  std::string name_;
  bool first_of_kind_;
  StageSpec spec_;
};

// The stages of `config`, in order. Throws ConfigError at the reference's line and column when a
// stage reads an artifact no earlier stage publishes, or one of the wrong kind.
std::vector<std::unique_ptr<Stage>> make_stages(const Config& config);

}  // namespace strata
