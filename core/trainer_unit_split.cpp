// The trainer's choice of the units split, and its step when its workers split the dense layers'
// units: the batch read into one tensor by all of them, one pass of replica 0 on the pool.
#include "core/errors.hpp"
#include "core/loss.hpp"
#include "core/trainer.hpp"

namespace strata {

bool Trainer::chooses_unit_split(ThreadSplit split) {
  Model& model = replicas_.front();
  const bool dense_only = model.can_split_units();
  if (pool_.size() == 1) return false;
  if (split == ThreadSplit::units && !dense_only)
    throw ConfigError(thread_split_units_error(config_, model.first_non_dense_name()));
  if (split != ThreadSplit::automatic) return split == ThreadSplit::units && dense_only;
  // auto: units while the activations they move between the cores each step (about the local
  // batch's inputs to every dense layer) are under a third of the weights that the batch split
  // moves (and as many gradients). On the benchmark MLP (535 000 weights, 1 552 inputs a sample)
  // on 2 threads the units split ran at 1.15 and 1.07-1.16 times the batch split's rate at local
  // batch 32 and 64, 0.97 at 128 and 0.93-0.99 at 256. A local batch above a worker's chunk
  // would pass through whole, its activations out of cache.
  const std::int64_t moved = local_batch_ * model.dense_input_width();
  return dense_only && 3 * moved <= model.parameter_count() && local_batch_ <= chunk_samples_;
}

double Trainer::unit_split_pass(std::span<const std::int64_t> shard, bool workers_read,
                                std::int64_t first_sample, double scale, std::int64_t& correct) {
  const auto local = static_cast<std::int64_t>(shard.size());
  if (workers_read) {
    // Every worker reads the whole batch, so the workers copy its rows into one tensor.
    size_batch(data_.train, local, shard_images_, shard_labels_);
    pool_.run([&](int i) {
      const auto [first, last] = worker_share(local, pool_.size(), i);
      const TraceSpan read(trace_, "data read", "data");
      gather_rows(
          data_.train,
          shard.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(last - first)),
          first, shard_images_, shard_labels_);
    });
  }
  const int replica = sync_ != nullptr ? sync_->replica() : 0;
  Model& model = replicas_.front();
  Worker& w = workers_.front();
  model.set_noise_position(static_cast<std::uint64_t>(position_.global_step),
                           static_cast<std::uint64_t>(first_sample + replica * local));
  const Tensor& logits = model.forward(shard_images_, true, &pool_);
  const double mean = softmax_cross_entropy(logits, shard_labels_, w.grad_logits, scale);
  correct += count_correct(logits, shard_labels_);
  model.backward(shard_images_, w.grad_logits, {}, &pool_);
  return mean * static_cast<double>(local);
}

}  // namespace strata
