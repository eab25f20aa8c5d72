#include "jobs/training_queue.hpp"

#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "hpo/grid_search.hpp"
#include "hpo/trial_guard.hpp"
#include "hpo/trial_scheduler.hpp"
#include "jobs/fault_injection.hpp"
#include "jobs/group_training.hpp"
#include "jobs/progress_lines.hpp"
#include "jobs/run_output.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/training_session.hpp"
#include "parallel/failure_agreement.hpp"

namespace strata {

TrialOutcome train_job(const StageContext& c, int id, const std::function<TrainingJob()>& build_job,
                       const std::function<void()>& serve) {
  const auto start = Clock::now();
  const Topology& topology = c.topology;
  const bool leader = topology.member().rank() == 0;
  std::optional<TrainingJob> job;
  std::optional<GroupTraining> group;
  std::optional<TrainingSession> session;
  int global_batch = 0;
  auto build = [&] {
    // Every rank of the group reaches GroupTraining, whose own agreements are collectives, or none
    // does: a job's data (a bootstrap sample, a copy) may not fit one rank's memory.
    Plan plan;
    agree_on_failure(topology.member(), [&] {
      inject_build_fault(BuildFault::before_build, topology.world_rank());
      job.emplace(build_job());
      plan = plan_on_run_layout(job->config, topology.plan());
    });
    global_batch = plan.global_batch();
    group.emplace(job->config, *job->data, topology, plan, c.threads, c.trace);
    group->trainer->set_evaluation_hook(serve);
    SessionSettings settings;
    settings.checkpoint_dir = job->checkpoints;
    settings.checkpoint = job->config.checkpoint;
    settings.epochs = job->config.training.epochs;
    settings.label = job->label;
    settings.steps_log = std::filesystem::path(job->config.output.dir) / "steps.jsonl";
    settings.meta = job->meta;
    settings.trace = c.trace;
    StepWork work;
    work.serve = serve;
    session.emplace(*group->trainer, topology, c.signals, std::move(settings), std::move(work));
  };
  auto train = [&] {
    Trainer& trainer = *group->trainer;
    const std::filesystem::path dir(job->config.output.dir);
    if (job->prepare) job->prepare(trainer);
    session->resume();
    std::optional<RunOutput> out;
    if (leader) {
      out.emplace(RunOutput::inside_checked_run(dir));
      out->keep_metrics_before(trainer.position().epoch);
    }
    session->run(job->config.training.epochs, {}, [&](const EpochMetrics& e) {
      if (out) out->append_metrics(e, trainer.device());
    });
    session->save_final_weights(dir / "weights.h5");
    if (job->finish) job->finish(trainer);
    session->wait();
    std::error_code ignored;
    if (leader) std::filesystem::remove_all(job->checkpoints, ignored);
    const EpochMetrics& last = trainer.last_epoch();
    TrialOutcome o;
    o.fitness = o.val_accuracy = last.val_accuracy;
    o.test_accuracy = last.test_accuracy;
    return o;
  };
  TrialOutcome o = run_guarded_trial(topology.member(), id, build, train);
  o.seconds = seconds_since(start);
  o.global_batch = global_batch;
  return o;
}

std::vector<bool> run_training_queue(
    const StageContext& c, const std::string& what, const std::filesystem::path& journal_dir,
    int count, const std::function<TrialOutcome(int id, const std::function<void()>& serve)>& run,
    const std::function<std::string(int id)>& describe) {
  const Topology& topology = c.topology;
  const bool coordinator = topology.world_rank() == 0;
  if (count == 0) return {};
  // The queue is a grid over one integer: trial i is training i.
  SearchSpace space;
  space.params.push_back(ParamSpec{what, ParamKind::integer, 0.0, double(count - 1), {}});
  GridSearch search(space,
                    GridConfig{1, topology.plan().groups, 0, std::nullopt, Direction::maximize});
  std::optional<TrialLog> log;
  int finished = 0;
  if (coordinator) {
    RunOutput::inside_checked_run(journal_dir);  // creates it
    log.emplace(journal_dir, search.space(), true);
    if (!log->recovered().empty()) {
      search.replay(log->recovered());
      log->check_replay(search);
      finished = static_cast<int>(log->recovered().size());
      fmt::print("[resume] {}: {} of {} trainings done; {} to train\n", what, finished, count,
                 count - finished);
    }
  }
  // A stop signal throws Interrupted on the groups it stopped mid-training and on the coordinator;
  // the other ranks return. All of them learn it here, before the collectives below, and leave
  // together.
  std::string stopped;
  const auto start = Clock::now();
  auto last_line = start - std::chrono::hours(1);
  const double interval = c.config.output.progress_seconds;
  SchedulerOptions options;
  options.stop_requested = [&] { return c.signals != nullptr && c.signals->requested(); };
  // Between results, a line every interval: long trainings must not leave the log silent.
  options.while_running = [&](const TrialsInFlight& running) {
    if (seconds_since(last_line) < interval || seconds_since(start) < interval) return;
    last_line = Clock::now();
    fmt::print("[{}] {}/{} done, {}\n", what, finished, count,
               describe_running(running(), describe));
    std::fflush(stdout);
  };
  try {
    run_trials(
        topology, search,
        [&](const Trial& trial, const TrialChannel& serve) {
          return run(static_cast<int>(std::lround(trial.genome[0])), serve);
        },
        [&](const Trial& trial, const TrialOutcome& o) {
          log->append(trial, o);
          ++finished;
          // Thousands of members must not print thousands of lines: failures, the last one, and
          // one per interval.
          if (o.status == TrialStatus::ok && finished < count &&
              seconds_since(last_line) < interval)
            return;
          last_line = Clock::now();
          fmt::print(
              "[{}] {} on group {}: {} | {}/{} done\n", what, describe(trial.id), o.member_group,
              o.status == TrialStatus::ok ? fmt::format("val acc {:.4f} test acc {:.4f} in {:.1f}s",
                                                        o.val_accuracy, o.test_accuracy, o.seconds)
                                          : fmt::format("{}: {}", to_string(o.status), o.reason),
              finished, count);
          std::fflush(stdout);
        },
        options);
  } catch (const Interrupted& e) {
    stopped = e.what();
  }
  if (topology.world().allreduce_max(stopped.empty() ? 0 : 1) > 0)
    throw Interrupted(stopped.empty() ? fmt::format("the {} stage stopped on a signal", what)
                                      : stopped);
  // What the coordinator's search knows, on every rank.
  std::vector<int> done(static_cast<std::size_t>(count), 0);
  if (coordinator)
    for (const Trial& t : search.trials())
      done[static_cast<std::size_t>(t.id)] = t.reported && !t.failed ? 1 : 0;
  std::string text;
  for (int d : done) text += d != 0 ? '1' : '0';
  topology.world().broadcast_string(text, 0);
  std::vector<bool> ok;
  for (char ch : text) ok.push_back(ch == '1');
  return ok;
}

}  // namespace strata
