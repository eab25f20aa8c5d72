#include "jobs/train_stage.hpp"

#include <optional>

#include <fmt/format.h>

#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/device.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_output.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/training_session.hpp"

namespace strata {

namespace {

void print_kernels(Trainer& trainer) {
  const auto report = kernel_report();
  fmt::print("[device] {}\n", detect_devices().summary);
  fmt::print(
      "[kernels] OpenBLAS core {} (CPU: {}); {} worker thread(s), single-threaded kernels each\n",
      report.openblas_core, report.cpu_best, trainer.threads());
  if (!report.warning.empty()) fmt::print(stderr, "warning: {}\n", report.warning);
}

void print_conv_implementations(Model& model) {
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    if (auto* conv = dynamic_cast<Conv2DLayer*>(&model.layer(i)))
      fmt::print("[kernels] {}: oneDNN {}\n", conv->name(), conv->implementation());
}

void train_member(const StageContext& c, int member) {
  const Topology& topology = c.topology;
  Config config = c.config;
  config.run.seed =
      derive_seed(c.config.run.seed, {seed_member, static_cast<std::uint64_t>(member)});
  const bool writes = topology.member().rank() == 0;
  const std::string tag = c.first_groups > 1 ? fmt::format("[m{}] ", member) : "";
  const Plan plan = plan_on_run_layout(config, topology.plan());
  // The data split comes from the run's seed, not the member's: every member, and strata predict
  // on a member's weights, sees the same validation hold-out and normalisation.
  const TrainingData data = load_training_data(c.config);
  GroupTraining group(config, data, topology, plan, c.threads);
  Trainer& trainer = *group.trainer;

  SessionSettings settings;
  settings.checkpoint_dir = std::filesystem::path(c.config.output.dir) / "checkpoints" /
                            fmt::format("stage{}", c.stage_index) / fmt::format("member{}", member);
  settings.checkpoint = config.checkpoint;
  settings.epochs = config.training.epochs;
  settings.label = tag;
  settings.meta.put_text("kind", "training");
  settings.meta.put_int("stage", c.stage_index);
  settings.meta.put_int("member", member);
  TrainingSession session(trainer, topology, c.signals, settings);
  session.resume();

  std::optional<RunOutput> output;
  const int epochs = config.training.epochs;
  if (writes) {
    output.emplace(RunOutput::inside_checked_run(member_dir(c.config, c.first_groups, member)));
    output->keep_metrics_before(trainer.position().epoch);
    fmt::print("{}[data] {} train / {} validation / {} test samples, shape {}, {} classes\n", tag,
               data.train.count(), data.validation.count(), data.test.count(),
               shape_string(data.sample_shape), data.num_classes);
    if (topology.world_rank() == 0) {
      print_kernels(trainer);
      fmt::print("[model]\n{}", trainer.model().summary());
    }
    fmt::print(
        "{}[train] {} epochs x {} steps of global batch {} ({} micro-batch(es) x {} replicas x "
        "{})\n",
        tag, epochs, trainer.steps_per_epoch(), trainer.global_batch(), plan.accumulate, plan.data,
        plan.local_batch);
    std::fflush(stdout);
  }
  bool first_epoch = true;
  session.run(
      epochs,
      [&](const TrainProgress& p) {
        if (!writes) return;
        fmt::print(
            "{}[train] epoch {}/{} step {}/{} loss {:.4f} lr {:.4g} {:.0f} samples/s ETA {}\n", tag,
            p.epoch, p.epochs, p.step, p.steps_per_epoch, p.loss, p.lr, p.samples_per_s,
            format_duration(p.eta_seconds));
        std::fflush(stdout);
      },
      [&](const EpochMetrics& m) {
        if (!writes) return;
        if (first_epoch && topology.world_rank() == 0) print_conv_implementations(trainer.model());
        first_epoch = false;
        output->append_metrics(m);
        fmt::print(
            "{}[epoch {}/{}] train loss {:.4f} acc {:.4f} | val loss {:.4f} acc {:.4f} | test acc "
            "{:.4f} | {:.0f} samples/s | {:.1f}s\n",
            tag, m.epoch, epochs, m.train_loss, m.train_accuracy, m.val_loss, m.val_accuracy,
            m.test_accuracy, m.samples_per_s, m.seconds);
        std::fflush(stdout);
      });
  session.save_final_weights(member_dir(c.config, c.first_groups, member) / "weights.h5");
  session.wait();
}

}  // namespace

std::filesystem::path member_dir(const Config& config, int members, int member) {
  const std::filesystem::path dir(config.output.dir);
  return members > 1 ? dir / "members" / std::to_string(member) : dir;
}

void train_stage(const StageContext& context) {
  const int groups = context.topology.plan().groups, group = context.topology.coords().group;
  const int members = context.first_groups;
  if (group >= members && context.topology.member().rank() == 0)
    fmt::print("[g{}] idle in this stage: the run has {} member(s), fixed when it started\n", group,
               members);
  for (int member = group; member < members; member += groups) train_member(context, member);
}

}  // namespace strata
