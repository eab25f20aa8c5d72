#include "core/trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/errors.hpp"

namespace strata {

namespace {

// Goyal et al.: a k times larger global batch takes a k times larger rate (warm it up in the
// schedule). The config's rate is for one local batch, so k = K x D: a function of the global
// batch alone, which a restart on another decomposition keeps.
double scaled_lr(const Config& config, const Plan& plan) {
  const double lr = config.training.optimizer.lr;
  return config.parallel.lr_scaling == LrScaling::linear
             ? lr * plan.global_batch() / plan.local_batch
             : lr;
}

std::int64_t checked_steps_per_epoch(const Config& config, const TrainingData& data,
                                     std::int64_t global_batch, const Plan& plan) {
  const std::int64_t steps = data.train.count() / global_batch;
  if (steps == 0)
    throw ConfigError(fmt::format(
        "{}: training.local_batch: the global batch {} ({} x {} replicas x {} micro-batches) is "
        "larger than the {} training samples",
        config.file, global_batch, plan.local_batch, plan.data, plan.accumulate,
        data.train.count()));
  return steps;
}

}  // namespace

Model build_model(const Config& config, const TrainingData& data, const LayerFactory& layers) {
  Model model(config.layers, data.sample_shape, data.num_classes,
              derive_seed(config.run.seed, {seed_init}), config.file, layers);
  model.reseed_noise(derive_seed(config.run.seed, {seed_noise}));
  std::vector<std::string> frozen;
  for (const auto& f : config.training.freeze) frozen.push_back(f.name);
  model.freeze(frozen);
  for (const auto& group : config.training.lr_groups)
    model.scale_learning_rate(group.layers, group.lr_scale);
  return model;
}

Plan standalone_plan(const Config& config, int replicas) {
  Plan plan;
  plan.local_batch = config.training.local_batch;
  plan.data = replicas;
  plan.world_size = replicas;
  plan.accumulate = std::max(config.parallel.accumulate, 1);
  plan.max_global_batch = plan.global_batch();
  return plan;
}

Trainer::Trainer(const Config& config, Model model, const TrainingData& data, const Plan& plan,
                 int threads, GradientSync* sync)
    : config_(config),
      data_(data),
      sync_(sync),
      pool_(threads),
      optimizer_(make_optimizer(config.training.optimizer)),
      local_batch_(plan.local_batch),
      replicas_count_(plan.data),
      accumulate_(plan.accumulate),
      global_batch_(plan.global_batch()),
      steps_per_epoch_(checked_steps_per_epoch(config, data, global_batch_, plan)),
      schedule_(config.training.schedule, scaled_lr(config, plan), steps_per_epoch_,
                config.training.epochs) {
  if ((sync != nullptr ? sync->replicas() : 1) != plan.data || plan.accumulate < 1 ||
      plan.local_batch < 1)
    throw std::invalid_argument(fmt::format(
        "Trainer: the plan has D = {}, K = {}, local batch {} but the gradient sync has {} "
        "replicas",
        plan.data, plan.accumulate, plan.local_batch, sync != nullptr ? sync->replicas() : 1));
  replicas_.push_back(std::move(model));
  for (int i = 1; i < pool_.size(); ++i) replicas_.push_back(replicas_.front().replicate());
  // The workers' replicas read one copy of the parameters (each writes its own gradients): the
  // step updates it with nothing to copy, and the cores' caches hold it once.
  const auto shared = replicas_.front().params();
  for (std::size_t r = 1; r < replicas_.size(); ++r) {
    const auto own = replicas_[r].params();
    for (std::size_t k = 0; k < shared.size(); ++k) own[k].value->bind(shared[k].value->values());
  }
  workers_.resize(static_cast<std::size_t>(pool_.size()));
  // A worker's chunk: as many samples as keep the largest layer output that training keeps whole
  // within worker_chunk_bytes. On the benchmark CNN (2 workers on a 2-core machine), while its
  // first conv's output (74 KB a sample) was kept whole, a worker's 128 samples in one pass ran 4%
  // slower than in chunks of 26 to 32; since that conv runs in slices with its pooling, the
  // largest output kept is the pooling's (18 KB), and the 128 in one pass ran 7-12% faster than
  // in 4 chunks.
  constexpr std::int64_t worker_chunk_bytes = std::int64_t{3} << 20;
  chunk_samples_ = std::max<std::int64_t>(
      1, worker_chunk_bytes /
             (replicas_.front().largest_kept_output() * static_cast<std::int64_t>(sizeof(float))));
  unit_split_ = chooses_unit_split(config.run.thread_split);
  // Only parameters that learn are summed, reduced, stepped and copied: frozen ones keep the
  // values every replica was built with.
  for (auto& replica : replicas_) replica_params_.push_back(replica.trainable_params());
  Model& first = replicas_.front();
  for (std::size_t i = 0; i < first.layer_count(); ++i) {
    std::vector<Param> learning;
    for (const auto& p : first.params_of(i))
      if (p.trainable) learning.push_back(p);
    layer_params_.push_back(std::move(learning));
  }
  // The step's pieces, in the order backward finishes their layers.
  layers_done_ = std::vector<std::atomic<int>>(first.layer_count());
  next_step_piece_ = std::vector<std::atomic<std::size_t>>(workers_.size());
  step_pieces_.resize(workers_.size());
  const auto& total = replica_params_.front();
  for (std::size_t i = first.layer_count(); i-- > 0;)
    for (const Param& p : layer_params_[i]) {
      const auto k = static_cast<std::size_t>(
          std::find_if(total.begin(), total.end(),
                       [&](const Param& q) { return q.value == p.value; }) -
          total.begin());
      for (int worker = 0; worker < pool_.size(); ++worker) {
        const auto [slice_begin, slice_end] = step_share(p, worker);
        for (std::int64_t begin = slice_begin; begin < slice_end; begin += step_chunk)
          step_pieces_[static_cast<std::size_t>(worker)].push_back(
              {k, i, begin, std::min(begin + step_chunk, slice_end)});
      }
    }
}

void Trainer::broadcast_weights() {
  // The replicas share replica 0's values (the constructor bound them), so a change there is
  // every worker's; an engine holds its own copy, uploaded before its next step.
  settle_host();
  host_changed_ = true;
}

void Trainer::set_gradient_engine(GradientEngine* engine) {
  if (engine != nullptr && pool_.size() != 1)
    throw std::invalid_argument(
        fmt::format("a gradient engine replaces the worker threads: the trainer must run 1, not {}",
                    pool_.size()));
  settle_host();
  engine_ = engine;
  host_changed_ = true;
}

bool Trainer::steps_on_engine() const {
  // No sum over replicas left for the host to make.
  return engine_ != nullptr && engine_->steps_on_device() &&
         (sync_ == nullptr || engine_->sums_over_replicas());
}

void Trainer::settle_host() {
  if (!engine_ahead_) return;
  engine_->download_state(replica_params_.front(), *optimizer_);
  engine_ahead_ = false;
}

Model& Trainer::model() {
  // The caller may read the weights or change them.
  settle_host();
  host_changed_ = true;
  return replicas_.front();
}

void Trainer::set_trace(Trace* trace) {
  trace_ = trace;
  for (Model& replica : replicas_) replica.set_trace(trace);
}

void Trainer::sum_over_replicas(std::span<double> values) {
  if (sync_ != nullptr) sync_->sum(values);
}

EpochMetrics Trainer::run_epoch(const ProgressCallback& on_progress) {
  TrainPosition& pos = position_;
  const auto resumed = Clock::now();
  const double seconds_before = pos.epoch_seconds, train_before = pos.train_seconds;
  // Every replica draws the same order; each takes its own shard of every global batch.
  const auto order = shuffled_indices(
      data_.train.count(),
      derive_seed(config_.run.seed, {seed_shuffle, static_cast<std::uint64_t>(pos.epoch)}));
  EpochMetrics m;
  m.epoch = pos.epoch;
  auto last_report = resumed;
  const std::int64_t first_step = pos.epoch_step;
  const int epochs = config_.training.epochs;
  while (pos.epoch_step < steps_per_epoch_) {
    const std::int64_t step = pos.epoch_step;
    const double lr = schedule_.at(pos.global_step);
    std::int64_t step_correct = 0;
    const double step_loss =
        train_step(std::span(order).subspan(static_cast<std::size_t>(step * global_batch_),
                                            static_cast<std::size_t>(global_batch_)),
                   lr, step_correct);
    // Summed over the replicas every step, so that all of them see the same loss and stop together.
    std::array<double, 2> stats{step_loss, static_cast<double>(step_correct)};
    sum_over_replicas(stats);
    if (!std::isfinite(stats[0]))
      throw DivergedError(
          fmt::format("training diverged: the loss is {} at epoch {} step {} (lr {:g})", stats[0],
                      pos.epoch, step + 1, lr));
    pos.loss_sum += stats[0];
    pos.correct += stats[1];
    ++pos.epoch_step;
    const auto batch = static_cast<double>(global_batch_);
    last_step_ = {pos.global_step,  pos.epoch,        pos.epoch_step,
                  stats[0] / batch, stats[1] / batch, lr};
    pos.train_seconds = train_before + seconds_since(resumed);
    pos.epoch_seconds = seconds_before + seconds_since(resumed);
    if (step_hook_) step_hook_();
    if (on_progress && seconds_since(last_report) >= config_.output.progress_seconds) {
      last_report = Clock::now();
      const double elapsed = seconds_since(resumed);
      const auto done_here = static_cast<double>(pos.epoch_step - first_step);
      const auto seen = static_cast<double>(pos.epoch_step * global_batch_);
      TrainProgress p{pos.epoch,
                      epochs,
                      pos.epoch_step,
                      steps_per_epoch_,
                      pos.loss_sum / seen,
                      lr,
                      done_here * static_cast<double>(global_batch_) / elapsed,
                      0.0};
      const double steps_left =
          static_cast<double>((epochs - pos.epoch + 1) * steps_per_epoch_ - pos.epoch_step);
      p.eta_seconds = steps_left * elapsed / done_here;
      on_progress(p);
    }
  }
  const auto samples = static_cast<double>(steps_per_epoch_ * global_batch_);
  m.lr = schedule_.at(std::max<std::int64_t>(pos.global_step - 1, 0));
  m.train_loss = pos.loss_sum / samples;
  m.train_accuracy = pos.correct / samples;
  m.samples_per_s = samples / std::max(pos.train_seconds, 1e-9);
  const Evaluation val = evaluate(data_.validation);
  const Evaluation test = evaluate(data_.test);
  m.val_loss = val.loss;
  m.val_accuracy = val.accuracy;
  m.test_loss = test.loss;
  m.test_accuracy = test.accuracy;
  m.seconds = seconds_before + seconds_since(resumed);
  const std::int64_t global_step = pos.global_step;
  pos = TrainPosition{};
  pos.epoch = m.epoch + 1;
  pos.global_step = global_step;
  last_epoch_ = m;
  return m;
}

}  // namespace strata
