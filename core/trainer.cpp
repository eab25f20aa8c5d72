#include "core/trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/loss.hpp"

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

std::span<const std::int64_t> Trainer::local_shard(
    std::span<const std::int64_t> micro_batch) const {
  // This process's shard of the micro-batch; its workers split the shard again, or its units.
  const auto local = static_cast<std::size_t>(local_batch_);
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
  return micro_batch.subspan(static_cast<std::size_t>(replica) * local, local);
}

std::int64_t Trainer::read_shard(std::span<const std::int64_t> micro_batch) {
  const auto batch = local_shard(micro_batch);
  const TraceSpan read(trace_, "data read", "data");
  gather_batch(data_.train, batch, shard_images_, shard_labels_);
  return static_cast<std::int64_t>(batch.size());
}

double Trainer::micro_step(std::span<const std::int64_t> micro_batch, std::int64_t first_sample,
                           double scale, const std::function<void(std::size_t)>& on_layer_done,
                           std::int64_t& correct) {
  // Samples in memory: each worker copies its own part of the shard, all at once. A file-backed
  // set is read on this thread (its reader is not for concurrent use), and the workers then copy
  // their parts of that.
  const bool workers_read = engine_ == nullptr && !data_.train.reader;
  const auto shard = local_shard(micro_batch);
  const std::int64_t local =
      workers_read ? static_cast<std::int64_t>(shard.size()) : read_shard(micro_batch);
  if (unit_split_) return unit_split_pass(shard, workers_read, first_sample, scale, correct);
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
  if (engine_ != nullptr) {
    const TraceSpan pass(trace_, "forward and backward", "compute");
    const auto result = engine_->gradients(
        shard_images_, shard_labels_, scale, static_cast<std::uint64_t>(position_.global_step),
        static_cast<std::uint64_t>(first_sample + replica * local));
    correct += result.correct;
    return result.loss_sum;
  }
  const int threads = pool_.size();
  pool_.run([&](int i) {
    auto [first, last] = worker_share(local, threads, i);
    Worker& w = workers_[static_cast<std::size_t>(i)];
    Model& model = replicas_[static_cast<std::size_t>(i)];
    // A large share goes through the model in chunks whose activations stay in cache, their
    // gradients summed here; unless backward hands each layer's gradients on as it finishes them.
    const std::int64_t count = last - first, cap = on_layer_done ? count : chunk_samples_;
    const std::int64_t chunks =
        std::max<std::int64_t>(1, (count + cap - 1) / std::max<std::int64_t>(cap, 1));
    w.loss_sum = 0.0;
    w.correct = 0;
    if (count == 0) {
      // More workers than samples: this one adds nothing to the step's sums.
      for (const Param& p : replica_params_[static_cast<std::size_t>(i)]) p.grad->fill(0.0f);
      return;
    }
    for (std::int64_t c = 0; c < chunks; ++c) {
      auto [begin, end] = worker_share(count, static_cast<int>(chunks), static_cast<int>(c));
      begin += first;
      end += first;
      if (workers_read) {
        const TraceSpan read(trace_, "data read", "data");
        gather_batch(
            data_.train,
            shard.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
            w.images, w.labels);
      } else {
        const std::int64_t sample = shard_images_.size() / std::max<std::int64_t>(local, 1);
        Shape shape = shard_images_.shape();
        shape[0] = end - begin;
        w.images.resize(shape);
        std::copy(shard_images_.data() + begin * sample, shard_images_.data() + end * sample,
                  w.images.data());
        w.labels.assign(shard_labels_.begin() + begin, shard_labels_.begin() + end);
      }
      model.set_noise_position(static_cast<std::uint64_t>(position_.global_step),
                               static_cast<std::uint64_t>(first_sample + replica * local + begin));
      const Tensor& logits = model.forward(w.images, true);
      // Each worker scales by the global batch, so the summed gradients are the global-batch mean.
      const double mean = softmax_cross_entropy(logits, w.labels, w.grad_logits, scale);
      w.loss_sum += mean * static_cast<double>(end - begin);
      w.correct += count_correct(logits, w.labels);
      model.backward(w.images, w.grad_logits,
                     i == 0 ? on_layer_done : std::function<void(std::size_t)>{});
      if (chunks > 1)
        sum_chunk_gradients(w, replica_params_[static_cast<std::size_t>(i)], c == 0,
                            c + 1 == chunks);
    }
  });
  double loss_sum = 0.0;
  for (const auto& w : workers_) {
    loss_sum += w.loss_sum;
    correct += w.correct;
  }
  return loss_sum;
}

double Trainer::train_step(std::span<const std::int64_t> global_batch, double lr,
                           std::int64_t& correct) {
  const auto scale = static_cast<double>(global_batch.size());
  const auto micro_size = global_batch.size() / static_cast<std::size_t>(accumulate_);
  if (steps_on_engine()) {
    if (host_changed_) engine_->upload_state(replica_params_.front(), *optimizer_);
    host_changed_ = false;
    const TraceSpan pass(trace_, "forward, backward and optimizer step", "compute");
    const int replica = sync_ != nullptr ? sync_->replica() : 0;
    double loss_sum = 0.0;
    // The micro-batches' gradients are summed on the engine; the host sees none of them.
    for (int k = 0; k < accumulate_; ++k) {
      const std::size_t first = static_cast<std::size_t>(k) * micro_size;
      const std::int64_t local = read_shard(global_batch.subspan(first, micro_size));
      const auto result = engine_->add_micro_batch(
          shard_images_, shard_labels_, scale, static_cast<std::uint64_t>(position_.global_step),
          static_cast<std::uint64_t>(static_cast<std::int64_t>(first) + replica * local), k,
          accumulate_);
      correct += result.correct;
      loss_sum += result.loss_sum;
    }
    engine_->apply_step(lr);
    engine_ahead_ = true;
    ++position_.global_step;
    return loss_sum;
  }
  // A single worker without accumulation hands each layer's gradients to sync_ as backward
  // finishes it, so the reduction of late layers may overlap the backward pass of early ones; but
  // not when its share would go through in chunks, whose gradients are whole only after the last:
  // chunks that stay in cache gained 4-6% on the benchmark CNN at local batch 128, and MPICH
  // advanced no reduction during backward to set against that. (local_batch_ is every replica's
  // share.)
  const bool overlap = sync_ != nullptr && pool_.size() == 1 && accumulate_ == 1 &&
                       engine_ == nullptr && local_batch_ <= chunk_samples_;
  std::function<void(std::size_t)> on_layer_done;
  if (overlap)
    on_layer_done = [this](std::size_t layer) {
      // One at a time, last first: the order apply_gradients reports them in after backward, so
      // that replicas that took different paths (another thread count) start the same buckets in
      // the same order, as MPI's non-blocking collectives require.
      const auto& p = layer_params_[layer];
      for (std::size_t k = p.size(); k-- > 0;) sync_->gradients_ready(std::span(&p[k], 1));
    };
  double loss_sum = 0.0;
  for (int k = 0; k < accumulate_; ++k) {
    const std::size_t first = static_cast<std::size_t>(k) * micro_size;
    loss_sum += micro_step(global_batch.subspan(first, micro_size),
                           static_cast<std::int64_t>(first), scale, on_layer_done, correct);
    if (accumulate_ > 1) accumulate_gradients(k == 0, k + 1 == accumulate_);
  }
  apply_gradients(lr, overlap);
  ++position_.global_step;
  return loss_sum;
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
