#include "core/trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/loss.hpp"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Worker i's share [begin, end) of n items split over `workers`.
std::pair<std::int64_t, std::int64_t> share(std::int64_t n, int workers, int i) {
  return {n * i / workers, n * (i + 1) / workers};
}

constexpr std::int64_t eval_batch = 256;

}  // namespace

namespace {

int replicas_of(const GradientSync* sync) {
  return sync != nullptr ? sync->replicas() : 1;
}

// Goyal et al.: a k times larger global batch takes a k times larger rate (warm it up in the
// schedule).
double scaled_lr(const Config& config, int replicas) {
  const double lr = config.training.optimizer.lr;
  return config.parallel.lr_scaling == LrScaling::linear ? lr * replicas : lr;
}

}  // namespace

Trainer::Trainer(const Config& config, const TrainingData& data, int threads, GradientSync* sync,
                 const LayerFactory& layers)
    : config_(config),
      data_(data),
      sync_(sync),
      pool_(threads),
      optimizer_(make_optimizer(config.training.optimizer)),
      accumulate_(std::max(config.parallel.accumulate, 1)),
      global_batch_(std::int64_t{config.training.local_batch} * replicas_of(sync) * accumulate_),
      steps_per_epoch_(data.train.count() / global_batch_),
      schedule_(config.training.schedule, scaled_lr(config, replicas_of(sync)), steps_per_epoch_,
                config.training.epochs) {
  if (steps_per_epoch_ == 0)
    throw ConfigError(fmt::format(
        "{}: training.local_batch: the global batch {} ({} x {} replicas) is larger than "
        "the {} training samples",
        config.file, global_batch_, config.training.local_batch, replicas_of(sync),
        data.train.count()));
  const std::uint64_t init_seed = derive_seed(config.run.seed, {seed_init});
  for (int i = 0; i < pool_.size(); ++i) {
    replicas_.emplace_back(config.layers, data.sample_shape, data.num_classes, init_seed,
                           config.file, layers);
    replicas_.back().reseed_noise(
        derive_seed(config.run.seed, {seed_noise, static_cast<std::uint64_t>(i)}));
  }
  workers_.resize(static_cast<std::size_t>(pool_.size()));
  for (auto& replica : replicas_) replica_params_.push_back(replica.params());
  Model& first = replicas_.front();
  for (std::size_t i = 0; i < first.layer_count(); ++i)
    layer_params_.push_back(first.layer(i).params());
}

void Trainer::broadcast_weights() {
  const auto& source = replica_params_.front();
  for (std::size_t r = 1; r < replicas_.size(); ++r)
    for (std::size_t k = 0; k < source.size(); ++k)
      std::copy(source[k].value->values().begin(), source[k].value->values().end(),
                replica_params_[r][k].value->values().begin());
}

void Trainer::sum_worker_gradients() {
  const auto& total = replica_params_.front();
  const int threads = pool_.size();
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [begin, end] = share(total[k].grad->size(), threads, worker);
      float* g = total[k].grad->data();
      for (std::size_t r = 1; r < replicas_.size(); ++r) {
        const float* h = replica_params_[r][k].grad->data();
        for (std::int64_t i = begin; i < end; ++i) g[i] += h[i];
      }
    }
  });
}

void Trainer::apply_gradients(double lr, bool reported) {
  const auto& total = replica_params_.front();
  // The workers' sum must be complete before the processes reduce it, unless a single worker
  // already handed each layer to sync_ during backward.
  bool workers_summed = replicas_.size() == 1 || accumulate_ > 1;
  if (sync_ != nullptr && !reported) {
    if (!workers_summed) sum_worker_gradients();
    workers_summed = true;
    for (std::size_t k = total.size(); k-- > 0;) sync_->gradients_ready(std::span(&total[k], 1));
  }
  if (sync_ != nullptr) sync_->finish();
  optimizer_->begin_step(total);
  const int threads = pool_.size();
  // Each worker owns a slice of every parameter: it sums the replicas' gradients there (in replica
  // order, so the result does not depend on timing), updates it, and copies it back to the
  // replicas.
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [begin, end] = share(total[k].value->size(), threads, worker);
      float* g = total[k].grad->data();
      if (!workers_summed)
        for (std::size_t r = 1; r < replicas_.size(); ++r) {
          const float* h = replica_params_[r][k].grad->data();
          for (std::int64_t i = begin; i < end; ++i) g[i] += h[i];
        }
      optimizer_->update(total[k], k, begin, end, lr);
      const float* w = total[k].value->data();
      for (std::size_t r = 1; r < replicas_.size(); ++r)
        std::copy(w + begin, w + end, replica_params_[r][k].value->data() + begin);
    }
  });
}

void Trainer::accumulate_gradients(bool first, bool last) {
  const auto& total = replica_params_.front();
  if (accumulated_.empty())
    for (const auto& p : total) accumulated_.emplace_back(p.grad->shape());
  const int threads = pool_.size();
  // Adds every worker's micro-batch gradients to the running sum; the last micro-batch leaves the
  // whole sum in replica 0's gradients, where the optimizer step reads it.
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [begin, end] = share(total[k].grad->size(), threads, worker);
      float* acc = accumulated_[k].data();
      float* g = total[k].grad->data();
      for (std::int64_t i = begin; i < end; ++i) {
        float sum = first ? 0.0f : acc[i];
        for (std::size_t r = 0; r < replicas_.size(); ++r)
          sum += replica_params_[r][k].grad->data()[i];
        if (last)
          g[i] = sum;
        else
          acc[i] = sum;
      }
    }
  });
}

void Trainer::sum_over_replicas(std::span<double> values) {
  if (sync_ != nullptr) sync_->sum(values);
}

double Trainer::micro_step(std::span<const std::int64_t> micro_batch, double scale,
                           const std::function<void(std::size_t)>& on_layer_done,
                           std::int64_t& correct) {
  // This process's shard of the micro-batch; its workers split the shard again.
  const auto local = static_cast<std::int64_t>(config_.training.local_batch);
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
  const auto batch = micro_batch.subspan(static_cast<std::size_t>(replica * local),
                                         static_cast<std::size_t>(local));
  // The shard is read on this thread (a file-backed set must not be read concurrently); the
  // workers then copy their parts of it.
  gather_batch(data_.train, batch, shard_images_, shard_labels_);
  const std::int64_t sample = shard_images_.size() / std::max<std::int64_t>(local, 1);
  const int threads = pool_.size();
  pool_.run([&](int i) {
    auto [begin, end] = share(local, threads, i);
    Worker& w = workers_[static_cast<std::size_t>(i)];
    Model& model = replicas_[static_cast<std::size_t>(i)];
    Shape shape = shard_images_.shape();
    shape[0] = end - begin;
    w.images.resize(shape);
    std::copy(shard_images_.data() + begin * sample, shard_images_.data() + end * sample,
              w.images.data());
    w.labels.assign(shard_labels_.begin() + begin, shard_labels_.begin() + end);
    const Tensor& logits = model.forward(w.images, true);
    // Each worker scales by the global batch, so the summed gradients are the global-batch mean.
    const double mean = softmax_cross_entropy(logits, w.labels, w.grad_logits, scale);
    w.loss_sum = mean * static_cast<double>(end - begin);
    w.correct = count_correct(logits, w.labels);
    model.backward(w.images, w.grad_logits,
                   i == 0 ? on_layer_done : std::function<void(std::size_t)>{});
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
  const auto micro_size = global_batch.size() / static_cast<std::size_t>(accumulate_);
  const auto scale = static_cast<double>(global_batch.size());
  // A single worker without accumulation hands each layer's gradients to sync_ as backward
  // finishes it, so the reduction of late layers overlaps the backward pass of early ones.
  const bool overlap = sync_ != nullptr && pool_.size() == 1 && accumulate_ == 1;
  std::function<void(std::size_t)> on_layer_done;
  if (overlap)
    on_layer_done = [this](std::size_t layer) {
      const auto& p = layer_params_[layer];
      if (!p.empty()) sync_->gradients_ready(p);
    };
  double loss_sum = 0.0;
  for (int k = 0; k < accumulate_; ++k) {
    loss_sum +=
        micro_step(global_batch.subspan(static_cast<std::size_t>(k) * micro_size, micro_size),
                   scale, on_layer_done, correct);
    if (accumulate_ > 1) accumulate_gradients(k == 0, k + 1 == accumulate_);
  }
  apply_gradients(lr, overlap);
  ++global_step_;
  return loss_sum;
}

EpochMetrics Trainer::run_epoch(int epoch, const ProgressCallback& on_progress) {
  const auto epoch_start = Clock::now();
  // Every replica draws the same order; each takes its own shard of every global batch.
  const auto order = shuffled_indices(
      data_.train.count(),
      derive_seed(config_.run.seed, {seed_shuffle, static_cast<std::uint64_t>(epoch)}));
  EpochMetrics m;
  m.epoch = epoch;
  double loss_sum = 0.0, correct = 0.0;
  auto last_report = epoch_start;
  const int epochs = config_.training.epochs;
  for (std::int64_t step = 0; step < steps_per_epoch_; ++step) {
    m.lr = schedule_.at(global_step_);
    std::int64_t step_correct = 0;
    const double step_loss =
        train_step(std::span(order).subspan(static_cast<std::size_t>(step * global_batch_),
                                            static_cast<std::size_t>(global_batch_)),
                   m.lr, step_correct);
    // Summed over the replicas every step, so that all of them see the same loss and stop together.
    std::array<double, 2> stats{step_loss, static_cast<double>(step_correct)};
    sum_over_replicas(stats);
    if (!std::isfinite(stats[0]))
      throw DivergedError(
          fmt::format("training diverged: the loss is {} at epoch {} step {} (lr {:g})", stats[0],
                      epoch, step + 1, m.lr));
    loss_sum += stats[0];
    correct += stats[1];
    if (step_hook_) step_hook_();
    if (on_progress && seconds_since(last_report) >= config_.output.progress_seconds) {
      last_report = Clock::now();
      const double elapsed = seconds_since(epoch_start);
      const auto seen = static_cast<double>((step + 1) * global_batch_);
      TrainProgress p{epoch,           epochs, step + 1,       steps_per_epoch_,
                      loss_sum / seen, m.lr,   seen / elapsed, 0.0};
      const double steps_left =
          static_cast<double>((epochs - epoch + 1) * steps_per_epoch_ - (step + 1));
      p.eta_seconds = steps_left * elapsed / static_cast<double>(step + 1);
      on_progress(p);
    }
  }
  const double train_seconds = seconds_since(epoch_start);
  const auto samples = static_cast<double>(steps_per_epoch_ * global_batch_);
  m.train_loss = loss_sum / samples;
  m.train_accuracy = correct / samples;
  m.samples_per_s = samples / train_seconds;
  const Evaluation val = evaluate(data_.validation);
  const Evaluation test = evaluate(data_.test);
  m.val_loss = val.loss;
  m.val_accuracy = val.accuracy;
  m.test_loss = test.loss;
  m.test_accuracy = test.accuracy;
  m.seconds = seconds_since(epoch_start);
  return m;
}

Evaluation Trainer::evaluate(const SampleSet& set) {
  Evaluation e;
  e.count = set.count();
  if (e.count == 0) return e;
  // Each replica evaluates its share of the rows, and its workers split that share.
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
  const auto [mine_begin, mine_end] = share(e.count, replicas_of(sync_), replica);
  const int threads = pool_.size();
  pool_.run([&](int i) {
    auto [begin, end] = share(mine_end - mine_begin, threads, i);
    Worker& w = workers_[static_cast<std::size_t>(i)];
    w.loss_sum = 0.0;
    w.correct = 0;
    std::vector<std::int64_t> rows;
    for (std::int64_t first = mine_begin + begin; first < mine_begin + end; first += eval_batch) {
      const std::int64_t last = std::min(first + eval_batch, mine_begin + end);
      rows.resize(static_cast<std::size_t>(last - first));
      for (std::int64_t r = first; r < last; ++r) rows[static_cast<std::size_t>(r - first)] = r;
      gather_batch(set, rows, w.images, w.labels);
      const Tensor& logits = replicas_[static_cast<std::size_t>(i)].forward(w.images, false);
      w.loss_sum += softmax_cross_entropy(logits, w.labels, w.grad_logits) *
                    static_cast<double>(last - first);
      w.correct += count_correct(logits, w.labels);
      if (i == 0 && evaluation_hook_) evaluation_hook_();  // worker 0 is the calling thread
    }
  });
  std::array<double, 2> stats{0.0, 0.0};
  for (const auto& w : workers_) {
    stats[0] += w.loss_sum;
    stats[1] += static_cast<double>(w.correct);
  }
  sum_over_replicas(stats);
  e.loss = stats[0] / static_cast<double>(e.count);
  e.accuracy = stats[1] / static_cast<double>(e.count);
  return e;
}

}  // namespace strata
