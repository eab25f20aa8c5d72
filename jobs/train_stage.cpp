#include "jobs/train_stage.hpp"

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "jobs/member_log.hpp"
#include "jobs/progress_board.hpp"
#include "jobs/progress_lines.hpp"
#include "jobs/run_output.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/training_session.hpp"

namespace strata {

namespace {

std::string data_line(const TrainingData& data) {
  return fmt::format("[data] {} train / {} validation / {} test samples, shape {}, {} classes",
                     data.train.count(), data.validation.count(), data.test.count(),
                     shape_string(data.sample_shape), data.num_classes);
}

// What the run computes with, once, before any training starts.
void print_startup(const StageContext& c, const TrainingData& data, Trainer& trainer) {
  const auto report = kernel_report();
  if (const GradientEngine* gpu = trainer.gradient_engine())
    fmt::print("[device] forward and backward on {}; optimizer {}; gradient sums {}\n",
               gpu->where(), trainer.steps_on_engine() ? "on the GPU" : "on the CPU",
               c.topology.data().size() == 1 ? "none (one replica)"
               : gpu->sums_over_replicas()   ? "on the GPUs (NCCL)"
                                             : "on the CPU");
  else
    fmt::print("[device] {}\n", detect_devices().summary);
  fmt::print(
      "[kernels] oneDNN {} on {} (CPU: {}); {} worker thread(s), single-threaded kernels each{}\n",
      report.onednn_version, report.onednn_isa, report.cpu_best, trainer.threads(),
      trainer.threads() == 1   ? ""
      : trainer.splits_units() ? ", splitting each dense layer's units"
                               : ", splitting each batch");
  if (!report.warning.empty()) fmt::print(stderr, "warning: {}\n", report.warning);
  fmt::print("{}\n", data_line(data));
  fmt::print("[model]\n{}", trainer.model().summary());
  const Plan& plan = c.topology.plan();
  fmt::print(
      "[train] {} member(s) x {} epochs x {} steps of global batch {} ({} micro-batch(es) x {} "
      "replicas x {}){}\n",
      c.first_groups, c.config.training.epochs, trainer.steps_per_epoch(), trainer.global_batch(),
      trainer.accumulate(), plan.data, c.config.training.local_batch,
      c.first_groups > 1 && !c.verbose
          ? "; one line per interval for all of them, each member's own in members/<m>/log.txt"
          : "");
  std::fflush(stdout);
}

void train_member(const StageContext& c, int member, ProgressBoard& board) {
  const Topology& topology = c.topology;
  Config config = c.config;
  config.run.seed = derive_seed(c.seed, {seed_member, static_cast<std::uint64_t>(member)});
  const bool writes = topology.member().rank() == 0;
  const Plan plan = plan_on_run_layout(config, topology.plan());
  // The data split comes from the run's seed, not the member's: every member, and strata predict
  // on a member's weights, sees the same validation hold-out and normalisation.
  const TrainingData data = load_training_data(c.config);
  GroupTraining group(config, data, topology, plan, c.threads, c.trace);
  Trainer& trainer = *group.trainer;
  if (member == 0 && topology.world_rank() == 0) print_startup(c, data, trainer);

  const std::filesystem::path dir = member_dir(c.config, c.first_groups, member);
  std::optional<RunOutput> output;
  if (writes) output.emplace(RunOutput::inside_checked_run(dir));
  // A single training keeps its lines on the console; many print one line for all (the board).
  const bool echo = c.first_groups == 1 || c.verbose;
  const MemberLog log(
      writes ? dir / "log.txt" : std::filesystem::path(),
      echo && writes ? (c.verbose ? fmt::format("[g{}] ", topology.coords().group) : std::string())
                     : std::optional<std::string>());

  SessionSettings settings;
  settings.checkpoint_dir = std::filesystem::path(c.config.output.dir) / "checkpoints" /
                            fmt::format("stage{}", c.stage_index) / fmt::format("member{}", member);
  settings.checkpoint = config.checkpoint;
  settings.epochs = config.training.epochs;
  settings.label = c.first_groups > 1 ? fmt::format("member {}: ", member) : "";
  settings.meta.put_text("kind", "training");
  settings.meta.put_int("stage", c.stage_index);
  settings.meta.put_int("member", member);
  settings.say = [&log](const std::string& line) { log.line(line); };
  settings.trace = c.trace;
  settings.steps_log = dir / "steps.jsonl";
  StepWork work;
  work.serve = [&board] { board.poll(); };
  work.stop_elsewhere = [&board] { return board.stop_elsewhere(); };
  trainer.set_evaluation_hook([&board] { board.poll(); });
  TrainingSession session(trainer, topology, c.signals, settings, std::move(work));
  session.resume();

  const int epochs = config.training.epochs;
  MemberReport report;
  report.member = member;
  report.group = topology.coords().group;
  report.epochs = epochs;
  report.steps_per_epoch = trainer.steps_per_epoch();
  const auto started = std::chrono::steady_clock::now();
  auto send = [&](MemberState state) {
    report.state = state;
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    board.report(report);
  };
  if (writes) {
    output->keep_metrics_before(trainer.position().epoch);
    // The console had these from print_startup: only the file gets them.
    log.detail(data_line(data));
    log.detail(fmt::format(
        "[train] member {}: {} epochs x {} steps of global batch {} ({} micro-batch(es) x {} "
        "replicas x {})",
        member, epochs, trainer.steps_per_epoch(), trainer.global_batch(), plan.accumulate,
        plan.data, plan.local_batch));
  }
  report.epoch = std::min(trainer.position().epoch, epochs);
  send(MemberState::running);
  bool first_epoch = true;
  try {
    session.run(
        epochs,
        [&](const TrainProgress& p) {
          if (!writes) return;
          report.update(p);
          send(MemberState::running);
          log.line(fmt::format(
              "[train] epoch {}/{} step {}/{} loss {:.4f} lr {:.4g} {:.0f} samples/s ETA {}",
              p.epoch, p.epochs, p.step, p.steps_per_epoch, p.loss, p.lr, p.samples_per_s,
              format_duration(p.eta_seconds)));
        },
        [&](const EpochMetrics& m) {
          if (!writes) return;
          if (first_epoch)
            for (std::size_t i = 0; i < trainer.model().layer_count(); ++i)
              if (auto* conv = dynamic_cast<Conv2DLayer*>(&trainer.model().layer(i)))
                log.detail(fmt::format("[kernels] {}: {}", conv->name(), conv->implementation()));
          first_epoch = false;
          output->append_metrics(m, trainer.device());
          report.update(m);
          send(MemberState::running);
          log.line(fmt::format(
              "[epoch {}/{}] train loss {:.4f} acc {:.4f} | val loss {:.4f} acc {:.4f} | test acc "
              "{:.4f} | {:.0f} samples/s | {:.1f}s",
              m.epoch, epochs, m.train_loss, m.train_accuracy, m.val_loss, m.val_accuracy,
              m.test_accuracy, m.samples_per_s, m.seconds));
        });
  } catch (const Interrupted&) {
    send(MemberState::stopped);
    throw;
  }
  // A member resumed after its last epoch has no epoch to report: its checkpoint has the metrics.
  report.update(trainer.last_epoch());
  report.epoch = epochs;
  session.save_final_weights(dir / "weights.h5");
  session.wait();
  send(MemberState::done);
}

}  // namespace

std::filesystem::path member_dir(const Config& config, int members, int member) {
  const std::filesystem::path dir(config.output.dir);
  return members > 1 ? dir / "members" / std::to_string(member) : dir;
}

void train_stage(const StageContext& context) {
  const int groups = context.topology.plan().groups, group = context.topology.coords().group;
  const int members = context.first_groups;
  ProgressBoard board(context.topology, members, context.config.output.progress_seconds, "train");
  if (groups > members && context.topology.world_rank() == 0)
    fmt::print(
        "[train] {} of the G = {} member groups idle in this stage: the run has {} member(s), "
        "fixed when it started\n",
        groups - members, groups, members);
  for (int member = group; member < members; member += groups) train_member(context, member, board);
  if (members > 1) {
    board.wait_for_all(context.signals);
    if (context.topology.world_rank() == 0) {
      fmt::print("{}", board.summary());
      std::fflush(stdout);
    }
  }
}

}  // namespace strata
