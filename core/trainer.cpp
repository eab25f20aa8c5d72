#include "core/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/loss.hpp"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Worker i's share [begin, end) of n items split over `workers`.
std::pair<std::int64_t, std::int64_t> share(std::int64_t n, int workers, int i) {
  return {n * i / workers, n * (i + 1) / workers};
}

constexpr std::int64_t eval_batch = 256;

}  // namespace

Trainer::Trainer(const Config& config, const TrainingData& data, int threads)
    : config_(config),
      data_(data),
      pool_(threads),
      optimizer_(make_optimizer(config.training.optimizer)),
      steps_per_epoch_(data.train.count() / config.training.local_batch),
      schedule_(config.training.schedule, config.training.optimizer.lr, steps_per_epoch_, config.training.epochs) {
  if (steps_per_epoch_ == 0)
    throw ConfigError(fmt::format("{}: training.local_batch: {} is larger than the {} training samples", config.file,
                                  config.training.local_batch, data.train.count()));
  const std::uint64_t init_seed = derive_seed(config.run.seed, {seed_init});
  for (int i = 0; i < pool_.size(); ++i) {
    replicas_.emplace_back(config.layers, data.sample_shape, data.num_classes, init_seed, config.file);
    replicas_.back().reseed_noise(derive_seed(config.run.seed, {seed_noise, static_cast<std::uint64_t>(i)}));
  }
  workers_.resize(static_cast<std::size_t>(pool_.size()));
  for (auto& replica : replicas_) replica_params_.push_back(replica.params());
}

void Trainer::broadcast_weights() {
  const auto& source = replica_params_.front();
  for (std::size_t r = 1; r < replicas_.size(); ++r)
    for (std::size_t k = 0; k < source.size(); ++k)
      std::copy(source[k].value->values().begin(), source[k].value->values().end(),
                replica_params_[r][k].value->values().begin());
}

void Trainer::apply_gradients(double lr) {
  const auto& total = replica_params_.front();
  optimizer_->begin_step(total);
  const int threads = pool_.size();
  // Each worker owns a slice of every parameter: it sums the replicas' gradients there (in replica
  // order, so the result does not depend on timing), updates it, and copies it back to the replicas.
  pool_.run([&](int worker) {
    for (std::size_t k = 0; k < total.size(); ++k) {
      auto [begin, end] = share(total[k].value->size(), threads, worker);
      float* g = total[k].grad->data();
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

double Trainer::train_step(std::span<const std::int64_t> batch, double lr, std::int64_t& correct) {
  const auto n = static_cast<std::int64_t>(batch.size());
  const int threads = pool_.size();
  pool_.run([&](int i) {
    auto [begin, end] = share(n, threads, i);
    Worker& w = workers_[static_cast<std::size_t>(i)];
    Model& model = replicas_[static_cast<std::size_t>(i)];
    gather_batch(data_.train, batch.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
                 w.images, w.labels);
    const Tensor& logits = model.forward(w.images, true);
    // Each worker scales by the whole batch, so the summed gradients are the batch mean.
    const double mean = softmax_cross_entropy(logits, w.labels, w.grad_logits, static_cast<double>(n));
    w.loss_sum = mean * static_cast<double>(end - begin);
    w.correct = count_correct(logits, w.labels);
    model.backward(w.images, w.grad_logits);
  });
  double loss_sum = 0.0;
  for (const auto& w : workers_) {
    loss_sum += w.loss_sum;
    correct += w.correct;
  }
  apply_gradients(lr);
  ++global_step_;
  return loss_sum;
}

EpochMetrics Trainer::run_epoch(int epoch, const ProgressCallback& on_progress) {
  const auto epoch_start = Clock::now();
  const auto batch = static_cast<std::int64_t>(config_.training.local_batch);
  const auto order =
      shuffled_indices(data_.train.count(), derive_seed(config_.run.seed, {seed_shuffle, static_cast<std::uint64_t>(epoch)}));
  EpochMetrics m;
  m.epoch = epoch;
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  auto last_report = epoch_start;
  const int epochs = config_.training.epochs;
  for (std::int64_t step = 0; step < steps_per_epoch_; ++step) {
    m.lr = schedule_.at(global_step_);
    const double batch_loss =
        train_step(std::span(order).subspan(static_cast<std::size_t>(step * batch), static_cast<std::size_t>(batch)),
                   m.lr, correct);
    if (!std::isfinite(batch_loss))
      throw DivergedError(fmt::format("training diverged: the loss is {} at epoch {} step {} (lr {:g})", batch_loss,
                                      epoch, step + 1, m.lr));
    loss_sum += batch_loss;
    if (on_progress && seconds_since(last_report) >= config_.output.progress_seconds) {
      last_report = Clock::now();
      const double elapsed = seconds_since(epoch_start);
      TrainProgress p{epoch, epochs, step + 1, steps_per_epoch_, loss_sum / static_cast<double>((step + 1) * batch),
                      m.lr, static_cast<double>((step + 1) * batch) / elapsed, 0.0};
      const double steps_left = static_cast<double>((epochs - epoch + 1) * steps_per_epoch_ - (step + 1));
      p.eta_seconds = steps_left * elapsed / static_cast<double>(step + 1);
      on_progress(p);
    }
  }
  const double train_seconds = seconds_since(epoch_start);
  const auto samples = static_cast<double>(steps_per_epoch_ * batch);
  m.train_loss = loss_sum / samples;
  m.train_accuracy = static_cast<double>(correct) / samples;
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
  const int threads = pool_.size();
  pool_.run([&](int i) {
    auto [begin, end] = share(e.count, threads, i);
    Worker& w = workers_[static_cast<std::size_t>(i)];
    w.loss_sum = 0.0;
    w.correct = 0;
    std::vector<std::int64_t> rows;
    for (std::int64_t first = begin; first < end; first += eval_batch) {
      const std::int64_t last = std::min(first + eval_batch, end);
      rows.resize(static_cast<std::size_t>(last - first));
      for (std::int64_t r = first; r < last; ++r) rows[static_cast<std::size_t>(r - first)] = r;
      gather_batch(set, rows, w.images, w.labels);
      const Tensor& logits = replicas_[static_cast<std::size_t>(i)].forward(w.images, false);
      w.loss_sum += softmax_cross_entropy(logits, w.labels, w.grad_logits) * static_cast<double>(last - first);
      w.correct += count_correct(logits, w.labels);
    }
  });
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  for (const auto& w : workers_) {
    loss_sum += w.loss_sum;
    correct += w.correct;
  }
  e.loss = loss_sum / static_cast<double>(e.count);
  e.accuracy = static_cast<double>(correct) / static_cast<double>(e.count);
  return e;
}

}  // namespace strata
