// The trainer's step when its workers split the dense layers' units: the batch read into one
// tensor by all of them, one forward and backward pass of replica 0 on the pool.
#include "core/loss.hpp"
#include "core/trainer.hpp"

namespace strata {

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
