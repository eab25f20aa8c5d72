// One training step: this process's shard of each micro-batch, the workers' forward and backward
// passes over their parts of it, and the hand-over of their gradients to the sync or the step.
#include <algorithm>
#include <functional>
#include <optional>

#include "core/loss.hpp"
#include "core/trainer.hpp"

namespace strata {

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

void Trainer::worker_pass(int i, std::span<const std::int64_t> shard, std::int64_t local,
                          bool workers_read, std::int64_t first_sample, double scale,
                          const std::function<void(std::size_t)>& on_layer_done) {
  const int threads = pool_.size();
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
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
    if (on_layer_done)
      for (std::size_t layer = 0; layer < model.layer_count(); ++layer) on_layer_done(layer);
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
    model.backward(w.images, w.grad_logits, on_layer_done);
    if (chunks > 1)
      sum_chunk_gradients(w, replica_params_[static_cast<std::size_t>(i)], c == 0, c + 1 == chunks);
  }
}

double Trainer::micro_step(std::span<const std::int64_t> micro_batch, std::int64_t first_sample,
                           double scale, const std::function<void(std::size_t)>& on_layer_done,
                           std::optional<double> step_lr, std::int64_t& correct) {
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
  // Handing layers on: to sync_ from the one worker, or as done, from every worker, to the
  // workers that step the parameters (step_lr).
  const std::function<void(std::size_t)> no_hand_over;
  std::function<void(std::size_t)> layer_done;
  if (step_lr)
    layer_done = [this](std::size_t layer) {
      layers_done_[layer].fetch_add(1, std::memory_order_release);
    };
  pool_.run([&](int i) {
    const std::function<void(std::size_t)>& hand_on =
        step_lr ? layer_done : (i == 0 ? on_layer_done : no_hand_over);
    if (!step_lr) return worker_pass(i, shard, local, workers_read, first_sample, scale, hand_on);
    try {
      worker_pass(i, shard, local, workers_read, first_sample, scale, hand_on);
    } catch (...) {
      step_abandoned_.store(true, std::memory_order_relaxed);
      throw;
    }
    const TraceSpan step(i == 0 ? trace_ : nullptr, "optimizer step", "compute");
    take_step_pieces(i, *step_lr);
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
  if (steps_during_backward()) {
    // The optimizer's per-step state (its step count) is set before the workers start: any of
    // them may update the first piece.
    optimizer_->begin_step(replica_params_.front());
    for (auto& done : layers_done_) done.store(0, std::memory_order_relaxed);
    for (auto& next : next_step_piece_) next.store(0, std::memory_order_relaxed);
    step_abandoned_.store(false, std::memory_order_relaxed);
    const double loss_sum = micro_step(global_batch, 0, scale, {}, lr, correct);
    ++position_.global_step;
    return loss_sum;
  }
  double loss_sum = 0.0;
  for (int k = 0; k < accumulate_; ++k) {
    const std::size_t first = static_cast<std::size_t>(k) * micro_size;
    loss_sum +=
        micro_step(global_batch.subspan(first, micro_size), static_cast<std::int64_t>(first), scale,
                   on_layer_done, std::nullopt, correct);
    if (accumulate_ > 1) accumulate_gradients(k == 0, k + 1 == accumulate_);
  }
  apply_gradients(lr, overlap);
  ++position_.global_step;
  return loss_sum;
}

}  // namespace strata
