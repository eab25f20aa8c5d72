// A stage of `strata run` behind one interface: what it publishes for later stages, and running it
// (resuming where an earlier allocation stopped it; its state lives in its trainings' checkpoints
// and its search's journal).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "jobs/artifacts.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

class Stage {
 public:
  virtual ~Stage() = default;
  // The prefix of its artifacts: the stage kind ("train", "hpo"), with the stage's position for a
  // kind that comes more than once ("train2").
  const std::string& name() const { return name_; }
  // Where its files go, under the run's output.dir: the directory itself for the first stage of a
  // kind (""), a subdirectory named after the stage for the next ones.
  std::string subdirectory() const { return first_of_kind_ ? "" : name_; }
  // The artifacts it will publish, known before anything runs.
  virtual std::vector<std::string> publishes() const = 0;
  // Collective over the world. Throws Interrupted after checkpointing on a stop signal. On world
  // rank 0 it publishes its artifacts into `artifacts`.
  virtual void run(const StageContext& context, Artifacts& artifacts) = 0;

 protected:
  Stage(std::string name, bool first_of_kind)
      : name_(std::move(name)), first_of_kind_(first_of_kind) {}

 private:
  std::string name_;
  bool first_of_kind_;
};

// The stages of `config`, in order.
std::vector<std::unique_ptr<Stage>> make_stages(const Config& config);

}  // namespace strata
