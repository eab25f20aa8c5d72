#include "jobs/training_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <ctime>
#include <thread>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/weights_io.hpp"
#include "jobs/fault_injection.hpp"
#include "jobs/run_output.hpp"
#include "parallel/checkpoint_shards.hpp"
#include "parallel/failure_agreement.hpp"
#include "parallel/model_parallel_layers.hpp"

namespace strata {

namespace {

// writing_flag: this shard's part of a model's checkpoint is still being written.
enum VoteFlag : unsigned { stop_flag = 1u, clock_flag = 2u, limit_flag = 4u, writing_flag = 8u };

std::string position_text(const TrainPosition& p, int epochs, std::int64_t steps_per_epoch) {
  if (p.epoch > epochs) return fmt::format("the end of epoch {} (training complete)", epochs);
  return fmt::format("epoch {}/{} step {}/{} (global step {})", p.epoch, epochs, p.epoch_step,
                     steps_per_epoch, p.global_step);
}

}  // namespace

TrainingSession::TrainingSession(Trainer& trainer, const Topology& topology,
                                 const StopSignals* signals, SessionSettings settings,
                                 StepWork work)
    : trainer_(trainer),
      topology_(topology),
      signals_(signals),
      settings_(std::move(settings)),
      work_(std::move(work)),
      store_(settings_.checkpoint_dir, settings_.checkpoint.keep),
      vote_(topology.member()) {
  trainer_.set_step_hook([this] { at_step(); });
  store_.set_trace(settings_.trace);
}

std::optional<LoadedCheckpoint> TrainingSession::load_newest_whole() {
  // The group's first rank chooses the checkpoint, so that every rank loads the same file.
  std::string chosen, problem;
  std::optional<StateDict> verified;  // the leader's: load_newest has read and checked it already
  if (leader()) {
    try {
      auto loaded = store_.load_newest([&](const std::string& why) { report_skipped(why); });
      if (loaded) {
        chosen = loaded->path.string();
        verified = std::move(loaded->state);
      }
    } catch (const DataError& e) {
      problem = e.what();
    }
  }
  const Communicator& member = topology_.member();
  member.broadcast_string(problem, 0);
  if (!problem.empty()) throw DataError(problem);
  member.broadcast_string(chosen, 0);
  if (chosen.empty()) return std::nullopt;
  return LoadedCheckpoint{chosen, verified ? std::move(*verified) : read_checkpoint(chosen)};
}

std::optional<LoadedCheckpoint> TrainingSession::load_newest_shards() {
  // Every rank of the group goes through the leader's list of files, newest first; each replica's
  // shards read and verify their slices together, and the group agrees on each file before the
  // next.
  const Communicator& member = topology_.member();
  std::string names;
  if (leader())
    for (const auto& file : store_.list()) names += file.string() + '\n';
  member.broadcast_string(names, 0);
  std::vector<std::filesystem::path> files;
  for (std::size_t at = 0, end; (end = names.find('\n', at)) != std::string::npos; at = end + 1)
    files.emplace_back(names.substr(at, end - at));
  StateDict layout;
  trainer_.save_state(layout);
  const auto read_agreed = [&](const std::filesystem::path& file) {
    StateDict state;
    agree_on_failure(
        member, [&] { state = read_checkpoint_shards(file.string(), layout, topology_.model()); });
    return state;
  };
  return store_.load_newest_of(
      files, [&](const std::string& why) { report_skipped(why); }, read_agreed, leader());
}

void TrainingSession::report_skipped(const std::string& why) const {
  if (leader())
    fmt::print(stderr, "strata: {}skipping a damaged checkpoint: {}\n", settings_.label, why);
}

std::optional<std::filesystem::path> TrainingSession::resume() {
  // A model split over shards is read slice by slice: no rank holds the whole state.
  std::optional<LoadedCheckpoint> loaded;
  const auto another_config = [&](const std::string& what) {
    return DataError(
        fmt::format("{} (a checkpoint of another config? move {} aside or pass --fresh)", what,
                    settings_.checkpoint_dir.string()));
  };
  try {
    loaded = topology_.plan().model > 1 ? load_newest_shards() : load_newest_whole();
    if (!loaded) return std::nullopt;
    trainer_.load_state(loaded->state);
  } catch (const CheckpointMismatch& e) {
    throw another_config(e.what());  // it names its file
  } catch (const DataError& e) {
    if (!loaded) throw;  // none valid, or a read error that names its file
    // A valid file that this model cannot take: any rank may be the first to find it.
    const std::string what = e.what(), chosen = loaded->path.string();
    throw another_config(what.starts_with(chosen) ? what : chosen + ": " + what);
  }
  const std::string chosen = loaded->path.string();
  const StateDict& state = loaded->state;
  elapsed_before_ =
      state.has_scalar("meta/elapsed_seconds") ? state.get_real("meta/elapsed_seconds") : 0.0;
  started_ = Clock::now();
  if (leader()) {
    const std::string line = fmt::format(
        "[resume] {}from {}: {}, written on G {} x D {} x M {} with {} thread(s)", settings_.label,
        chosen, position_text(trainer_.position(), settings_.epochs, trainer_.steps_per_epoch()),
        state.get_int("meta/groups"), state.get_int("meta/data"), state.get_int("meta/model"),
        state.get_int("meta/threads"));
    if (settings_.say) {
      settings_.say(line);
    } else {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    }
  }
  return std::filesystem::path(chosen);
}

void TrainingSession::run(int epochs, const ProgressCallback& on_progress,
                          const std::function<void(const EpochMetrics&)>& on_epoch) {
  while (trainer_.position().epoch <= epochs) {
    const EpochMetrics m = trainer_.run_epoch(on_progress);
    if (steps_.is_open()) steps_.flush();
    if (on_epoch) on_epoch(m);
    if (m.epoch < epochs || settings_.checkpoint_last_epoch) checkpoint();
  }
}

void TrainingSession::checkpoint() {
  const TraceSpan span(settings_.trace, "checkpoint snapshot", "io");
  // The steps up to a checkpoint are on disk before it is: a resumed run keeps them.
  if (steps_.is_open()) steps_.flush();
  last_checkpoint_ = Clock::now();
  // Data replicas hold the same state: replica 0's shards save it.
  if (topology_.coords().data != 0) return;
  if (topology_.plan().model > 1) {
    // Each shard writes its own slices into the one file, in the background: no rank holds the
    // whole state. The previous write ends before its snapshot is overwritten.
    store_.finish_shards();
    trainer_.save_state(shard_state_);
    put_meta(shard_state_);
    store_.save_shards(shard_state_, topology_.model());
    votes_since_shard_save_ = 0;
    return;
  }
  // The snapshot goes into the buffers of the last checkpoint (written by now: save() would wait
  // for it anyway), so that it copies at memory speed instead of faulting in new pages. A GPU's
  // state travels to the host while training goes on.
  store_.wait();
  StateDict state = store_.take_buffers();
  std::function<void(StateDict&)> complete = trainer_.save_state_in_flight(state);
  put_meta(state);
  store_.save(std::move(state), std::move(complete));
}

void TrainingSession::put_meta(StateDict& state) const {
  state.merge(settings_.meta, "meta");
  const TrainPosition& p = trainer_.position();
  const Plan& plan = topology_.plan();
  state.put_int("meta/epoch", p.epoch);
  state.put_int("meta/epoch_step", p.epoch_step);
  state.put_int("meta/global_step", p.global_step);
  state.put_int("meta/epochs", settings_.epochs);
  state.put_int("meta/world_size", plan.world_size);
  state.put_int("meta/groups", plan.groups);
  state.put_int("meta/data", plan.data);
  state.put_int("meta/model", plan.model);
  state.put_int("meta/accumulate", trainer_.accumulate());
  state.put_int("meta/global_batch", trainer_.global_batch());
  state.put_int("meta/threads", trainer_.threads());
  state.put_int("meta/written_unix", static_cast<std::int64_t>(std::time(nullptr)));
  state.put_real("meta/elapsed_seconds", elapsed_seconds());
}

void TrainingSession::save_final_weights(const std::filesystem::path& path) {
  const Normalisation normalisation = trainer_.data().normalisation();
  if (topology_.plan().model > 1) {
    const auto whole = gather_full_weights(trainer_.model());
    if (leader()) save_weights(path.string(), whole, &normalisation);
  } else if (leader()) {
    save_weights(path.string(), trainer_.model(), &normalisation);
  }
}

double TrainingSession::elapsed_seconds() const {
  return elapsed_before_ + seconds_since(started_);
}

void TrainingSession::wait() {
  if (topology_.plan().model > 1) {
    if (topology_.coords().data == 0) store_.finish_shards();
    return;
  }
  if (leader()) store_.wait();
}

void TrainingSession::log_step() {
  const StepMetrics& m = trainer_.last_step();
  if (!steps_.is_open()) {
    // Rows of steps after this training's checkpoint (an attempt that went on and was killed)
    // give way to the steps trained again.
    keep_rows_before(settings_.steps_log, "global_step", m.global_step);
    steps_.open(settings_.steps_log, std::ios::out | std::ios::app);
    if (!steps_) throw DataError(fmt::format("cannot write {}", settings_.steps_log.string()));
  }
  // fmt writes each number's shortest exact form, a few times faster than building a JSON object:
  // this runs every step. The loss is finite here (a non-finite one stopped the training).
  steps_ << fmt::format(
      R"({{"global_step":{},"epoch":{},"step":{},"loss":{},"accuracy":{},"lr":{}}})"
      "\n",
      m.global_step, m.epoch, m.step, m.loss, m.accuracy, m.lr);
  if (!steps_)
    throw DataError(fmt::format("cannot append to {} (disk full?)", settings_.steps_log.string()));
}

void TrainingSession::at_step() {
  const FaultPlan& fault = FaultPlan::from_environment();
  const std::int64_t step = trainer_.position().global_step;
  if (step == fault.kill_at_step) std::raise(SIGKILL);
  if (step == fault.fail_at_step && topology_.world_rank() == topology_.world().size() - 1)
    throw DataError(fmt::format("injected fault (STRATA_FAULT=fail_at_step={}) on world rank {}",
                                step, topology_.world_rank()));
  if (step == fault.stop_at_step) {
    // To the process: this thread blocks it. Wait until the signal thread has recorded it, so
    // that this step boundary sees it.
    ::kill(::getpid(), settings_.checkpoint.signal);
    while (signals_ != nullptr && !signals_->requested()) std::this_thread::yield();
  }
  if (leader() && !settings_.steps_log.empty()) log_step();
  if (work_.serve) work_.serve();
  unsigned mine = 0;
  if (signals_ != nullptr && signals_->requested()) mine |= stop_flag;
  if (work_.stop_elsewhere && work_.stop_elsewhere()) mine |= stop_flag;
  if (leader() && settings_.checkpoint.every_seconds > 0 &&
      seconds_since(last_checkpoint_) >= settings_.checkpoint.every_seconds)
    mine |= clock_flag;
  if (work_.over_limit && work_.over_limit()) mine |= limit_flag;
  if (store_.shard_writing()) mine |= writing_flag;
  const unsigned voted = vote_.exchange(mine);
  votes_since_shard_save_ = std::min(votes_since_shard_save_ + 1, 2);
  // A model's checkpoint is named as soon as the vote shows every shard done with it, not at the
  // next one: a crash in between then loses no more than on one rank. The vote answers one call
  // late, so only a vote cast after the write began counts.
  if (store_.shards_in_flight() && votes_since_shard_save_ >= 2 && !(voted & writing_flag))
    store_.finish_shards();
  const TrainPosition& p = trainer_.position();
  if (voted & stop_flag) {
    const auto start = Clock::now();
    checkpoint();
    wait();
    throw Interrupted(
        fmt::format("{}stopped by a signal at epoch {} step {}: checkpoint written in {:.2f} s",
                    settings_.label, p.epoch, p.epoch_step, seconds_since(start)));
  }
  if (voted & limit_flag) work_.stop_over_limit();
  const int every = settings_.checkpoint.every_steps;
  if ((every > 0 && p.global_step % every == 0) || (voted & clock_flag)) checkpoint();
}

}  // namespace strata
