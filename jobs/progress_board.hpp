// One console for many member groups: each group's first rank reports its trainings to world
// rank 0, which prints one line per interval for the whole stage and a table across members at the
// end. Per-group detail goes to each member's log.txt instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/trainer.hpp"
#include "jobs/stop_signals.hpp"
#include "parallel/topology.hpp"

namespace strata {

enum class MemberState : std::int32_t { waiting, running, done, stopped };

// Where one training stands; sent as raw bytes, so plain numbers only.
struct MemberReport {
  std::int32_t member = -1;
  std::int32_t group = 0;
  MemberState state = MemberState::waiting;
  std::int32_t epoch = 0;  // 1-based; the epoch in progress, or the last one when done
  std::int32_t epochs = 0;
  std::int64_t step = 0;
  std::int64_t steps_per_epoch = 0;
  double samples_per_s = 0.0;
  double train_loss = 0.0;
  double val_accuracy = -1.0;  // of the last finished epoch; < 0: none yet
  double test_accuracy = -1.0;
  double seconds = 0.0;  // this training's, in this allocation

  // Where a progress callback or a finished epoch puts the training.
  void update(const TrainProgress& p);
  void update(const EpochMetrics& m);
};

class ProgressBoard {
 public:
  // `members` trainings, member m on group m mod G; `what` names them on the console ("train").
  ProgressBoard(const Topology& topology, int members, double interval_s, std::string what);

  // On a group's first rank: sends `report` to world rank 0 when the interval has passed since
  // this group's last one, or when its state changed (always for done and stopped).
  void report(const MemberReport& report);
  // On world rank 0 (nothing elsewhere): takes the reports that arrived, and prints the stage's
  // line when the interval has passed. Cheap enough for every step.
  void poll();
  // On world rank 0: polls until every member is done or its group stopped (a stop signal), then
  // prints the stage's last line. A signal to rank 0 meanwhile stops the other groups. Nothing
  // elsewhere.
  void wait_for_all(const StopSignals* signals);
  // On a group's first rank: whether world rank 0 said the job stops, because a signal reached
  // some group but perhaps not this one (a signal sent to one process, not the whole job).
  bool stop_elsewhere();
  // On world rank 0: a table of every member's last report (the best and worst rows and a few
  // between when there are many).
  std::string summary() const;

 private:
  void take(const MemberReport& r);
  void stop_everyone();
  void print_line();
  bool finished() const;

  const Topology& topology_;
  std::string what_;
  double interval_s_;
  std::vector<MemberReport> latest_;  // world rank 0: per member
  std::vector<bool> group_stopped_;
  bool stop_sent_ = false;      // world rank 0: every group was told to stop
  bool stop_received_ = false;  // a group's first rank: told to stop
  std::chrono::steady_clock::time_point started_, last_line_, last_sent_;
  MemberState last_state_ = MemberState::waiting;
  int last_member_ = -1;
};

}  // namespace strata
